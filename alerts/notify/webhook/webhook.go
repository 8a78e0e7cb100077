// Package webhook POSTs alerts as JSON to any HTTP endpoint, signed with HMAC-SHA256.
//
// Headers: X-Ragwatch-Timestamp is the send time in unix seconds; X-Ragwatch-Signature is
// "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body)). Receivers recompute it over
// the raw body, compare in constant time and reject stale timestamps to stop replays.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/notify/internal/httpsend"
)

// Header names.
const (
	HeaderSignature = "X-Ragwatch-Signature"
	HeaderTimestamp = "X-Ragwatch-Timestamp"
)

// Message is the body.
type Message struct {
	Version string       `json:"version"`
	Status  string       `json:"status"`
	Alert   alerts.Alert `json:"alert"`
}

// Notifier posts to one endpoint.
type Notifier struct {
	cfg    Config
	client *http.Client
	now    func() time.Time
}

// New returns the notifier.
func New(cfg Config, client *http.Client, now func() time.Time) *Notifier {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	if now == nil {
		now = time.Now
	}
	return &Notifier{cfg: cfg, client: client, now: now}
}

// Sign returns the signature header value for body sent at ts.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a signature in constant time.
func Verify(secret []byte, ts string, body []byte, sig string) bool {
	return hmac.Equal([]byte(Sign(secret, ts, body)), []byte(sig))
}

// Notify implements notify.Notifier.
func (n *Notifier) Notify(ctx context.Context, a alerts.Alert) (bool, error) {
	body, err := json.Marshal(Message{Version: "1", Status: a.Status, Alert: a})
	if err != nil {
		return false, fmt.Errorf("encode alert: %w", err)
	}
	ts := strconv.FormatInt(n.now().Unix(), 10)
	h := http.Header{}
	h.Set(HeaderTimestamp, ts)
	if s := n.cfg.Secret.Reveal(); s != "" {
		h.Set(HeaderSignature, Sign([]byte(s), ts, body))
	}
	return httpsend.Post(ctx, n.client, n.cfg.URL.Reveal(), body, h)
}
