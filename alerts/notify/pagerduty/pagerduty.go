// Package pagerduty triggers and resolves PagerDuty incidents through the Events API v2, with
// the alert's fingerprint as the stable dedup_key.
package pagerduty

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/notify/internal/httpsend"
)

// Event is an Events API v2 event.
type Event struct {
	RoutingKey  string   `json:"routing_key"`
	EventAction string   `json:"event_action"` // trigger | resolve
	DedupKey    string   `json:"dedup_key"`
	Payload     *Payload `json:"payload,omitempty"`
	Client      string   `json:"client,omitempty"`
	ClientURL   string   `json:"client_url,omitempty"`
	Links       []Link   `json:"links,omitempty"`
}

// Payload describes a triggered event.
type Payload struct {
	Summary       string         `json:"summary"`
	Source        string         `json:"source"`
	Severity      string         `json:"severity"` // critical | error | warning | info
	Timestamp     string         `json:"timestamp,omitempty"`
	Component     string         `json:"component,omitempty"`
	Group         string         `json:"group,omitempty"`
	Class         string         `json:"class,omitempty"`
	CustomDetails map[string]any `json:"custom_details,omitempty"`
}

// Link is a link shown on the incident.
type Link struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

// Notifier sends to one integration.
type Notifier struct {
	cfg    Config
	client *http.Client
}

// New returns the notifier.
func New(cfg Config, client *http.Client) *Notifier {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Notifier{cfg: cfg, client: client}
}

// Severity maps ragwatch severities to PagerDuty's.
func Severity(s string) string {
	switch s {
	case "page":
		return "critical"
	case "ticket":
		return "warning"
	}
	return "info"
}

// Event builds the event for an alert: resolve events carry only the key and action.
func (n *Notifier) Event(a alerts.Alert) Event {
	ev := Event{RoutingKey: n.cfg.RoutingKey.Reveal(), DedupKey: a.Fingerprint}
	if !a.Firing() {
		ev.EventAction = "resolve"
		return ev
	}
	ev.EventAction = "trigger"
	summary := a.Summary
	if len(summary) > 1024 {
		summary = summary[:1024]
	}
	details := map[string]any{}
	for k, v := range a.Annotations() {
		if k != "summary" {
			details[k] = v
		}
	}
	details["labels"] = a.Labels
	if a.Diagnosis != nil {
		// The structured form, so an event rule can route on the pattern.
		details["diagnosis"] = a.Diagnosis
	}
	ev.Payload = &Payload{Summary: summary, Source: "ragwatch/" + a.Service, Severity: Severity(a.Severity),
		Timestamp: a.StartsAt.UTC().Format(time.RFC3339), Component: a.Service, Group: a.Rule, Class: a.Kind,
		CustomDetails: details}
	ev.Client, ev.ClientURL = "ragwatch", a.DashboardURL
	if a.RunbookURL != "" {
		ev.Links = append(ev.Links, Link{Href: a.RunbookURL, Text: "Runbook"})
	}
	for _, e := range a.Evidence {
		if e.URL != "" {
			ev.Links = append(ev.Links, Link{Href: e.URL, Text: fmt.Sprintf("Trace %s (%s)", e.TraceID, alerts.FormatValue(e.Value))})
		}
	}
	return ev
}

// Notify implements notify.Notifier.
func (n *Notifier) Notify(ctx context.Context, a alerts.Alert) (bool, error) {
	body, err := json.Marshal(n.Event(a))
	if err != nil {
		return false, fmt.Errorf("encode event: %w", err)
	}
	return httpsend.Post(ctx, n.client, n.cfg.URL, body, nil)
}
