// Package alertmanager sends alerts to Prometheus Alertmanager's API v2 (POST /api/v2/alerts).
package alertmanager

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/notify/internal/httpsend"
	"github.com/ragwatch/ragwatch/config"
)

// PostableAlert is Alertmanager API v2's alert.
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Notifier posts to one Alertmanager.
type Notifier struct {
	cfg    Config
	client *http.Client
	now    func() time.Time
}

// New returns the notifier; nil client and now take defaults.
func New(cfg Config, client *http.Client, now func() time.Time) *Notifier {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	if now == nil {
		now = time.Now
	}
	cfg.URL = config.Secret(strings.TrimRight(cfg.URL.Reveal(), "/"))
	return &Notifier{cfg: cfg, client: client, now: now}
}

// Payload is the body for one alert: firing alerts carry an EndsAt 4 repeat intervals ahead
// (none when not repeated), resolved ones their resolution time.
func (n *Notifier) Payload(a alerts.Alert) []PostableAlert {
	p := PostableAlert{Labels: a.Labels, Annotations: a.Annotations(), StartsAt: a.StartsAt.UTC(), GeneratorURL: a.DashboardURL}
	switch {
	case !a.Firing():
		p.EndsAt = a.EndsAt.UTC()
	case n.cfg.RepeatInterval > 0:
		p.EndsAt = n.now().Add(4 * n.cfg.RepeatInterval).UTC()
	}
	return []PostableAlert{p}
}

// Notify implements notify.Notifier.
func (n *Notifier) Notify(ctx context.Context, a alerts.Alert) (bool, error) {
	body, err := json.Marshal(n.Payload(a))
	if err != nil {
		return false, fmt.Errorf("encode alert: %w", err)
	}
	return httpsend.Post(ctx, n.client, n.cfg.URL.Reveal()+"/api/v2/alerts", body, nil)
}
