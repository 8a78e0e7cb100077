// Package slack posts alerts to a Slack incoming webhook as a readable message with the same
// facts as the other notifiers.
package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/notify/internal/httpsend"
)

// Message is an incoming-webhook message.
type Message struct {
	Text   string  `json:"text"`
	Blocks []Block `json:"blocks"`
}

// Block is a Block Kit block (the subset used).
type Block struct {
	Type     string `json:"type"`
	Text     *Text  `json:"text,omitempty"`
	Fields   []Text `json:"fields,omitempty"`
	Elements []Text `json:"elements,omitempty"`
}

// Text is a text object.
type Text struct {
	Type string `json:"type"` // plain_text | mrkdwn
	Text string `json:"text"`
}

// Notifier posts to one webhook.
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

// esc escapes text for Slack's mrkdwn (and the top-level text, which Slack reads as mrkdwn
// too), as its formatting guide asks: with &, < and > escaped, text from the traces (a
// service name, a summary quoting one) cannot write <!channel>, <!here>, <@user> or a
// <url|label> link of its own.
var esc = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escURL escapes the URL part of a <url|label> link: & as Slack asks, and <, > and | (which
// would end the link or start its label) percent-encoded, which keeps the URL working.
var escURL = strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C")

func link(url, text string) string {
	if url == "" {
		return esc.Replace(text)
	}
	return "<" + escURL.Replace(url) + "|" + esc.Replace(text) + ">"
}

// Message builds the message for an alert.
func (n *Notifier) Message(a alerts.Alert) Message {
	state := "FIRING"
	if !a.Firing() {
		state = "RESOLVED"
	}
	title := fmt.Sprintf("[%s] %s %s (%s, %s)", state, a.Name, a.Rule, a.Service, a.Severity)
	// The header is plain_text, which Slack shows as written; everything else is mrkdwn.
	m := Message{Text: esc.Replace(title + ": " + a.Summary)}
	m.Blocks = append(m.Blocks,
		Block{Type: "header", Text: &Text{Type: "plain_text", Text: title}},
		Block{Type: "section", Text: &Text{Type: "mrkdwn", Text: esc.Replace(a.Description)}})
	fields := []Text{
		{Type: "mrkdwn", Text: "*Value*\n" + alerts.FormatValue(a.Value)},
		{Type: "mrkdwn", Text: "*Threshold*\n" + esc.Replace(a.ThresholdText())},
		{Type: "mrkdwn", Text: "*Window*\n" + a.Window.String()},
		{Type: "mrkdwn", Text: fmt.Sprintf("*Samples*\n%d", a.N)},
	}
	if iv := a.IntervalText(); iv != "" {
		fields = append(fields, Text{Type: "mrkdwn", Text: "*95% interval*\n" + esc.Replace(iv)})
	}
	if a.BudgetRemaining != nil {
		fields = append(fields, Text{Type: "mrkdwn", Text: "*Error budget left*\n" + alerts.FormatValue(*a.BudgetRemaining)})
	}
	if ct := a.ChangeTimeText(); ct != "" {
		// When it started comes first to the eye of whoever correlates it with a deploy.
		fields = append([]Text{{Type: "mrkdwn", Text: "*Changed at*\n" + ct}}, fields...)
	}
	if a.LevelBefore != nil && a.LevelAfter != nil && a.ChangeTime != nil {
		fields = append(fields, Text{Type: "mrkdwn", Text: "*Before*\n" + esc.Replace(a.LevelBefore.Text())},
			Text{Type: "mrkdwn", Text: "*After*\n" + esc.Replace(a.LevelAfter.Text())})
	}
	m.Blocks = append(m.Blocks, Block{Type: "section", Fields: fields})
	if d := a.DiagnosisText(); d != "" {
		m.Blocks = append(m.Blocks, Block{Type: "section", Text: &Text{Type: "mrkdwn", Text: "*Diagnosis*\n" + esc.Replace(d)}})
	}
	if len(a.Evidence) > 0 {
		var b strings.Builder
		b.WriteString("*Worst requests*")
		for _, e := range a.Evidence {
			b.WriteString("\n• ")
			b.WriteString(link(e.URL, e.TraceID))
			b.WriteString(" value ")
			b.WriteString(alerts.FormatValue(e.Value))
		}
		m.Blocks = append(m.Blocks, Block{Type: "section", Text: &Text{Type: "mrkdwn", Text: b.String()}})
	}
	var links []string
	if a.RunbookURL != "" {
		links = append(links, link(a.RunbookURL, "Runbook"))
	}
	if a.DashboardURL != "" {
		links = append(links, link(a.DashboardURL, "Dashboard"))
	}
	if len(links) > 0 {
		m.Blocks = append(m.Blocks, Block{Type: "context", Elements: []Text{{Type: "mrkdwn", Text: strings.Join(links, " · ")}}})
	}
	return m
}

// Notify implements notify.Notifier.
func (n *Notifier) Notify(ctx context.Context, a alerts.Alert) (bool, error) {
	body, err := json.Marshal(n.Message(a))
	if err != nil {
		return false, fmt.Errorf("encode message: %w", err)
	}
	return httpsend.Post(ctx, n.client, n.cfg.URL.Reveal(), body, nil)
}
