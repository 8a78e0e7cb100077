// Package anthropic is the judge backend for Anthropic's Messages API.
package anthropic

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// DefaultBaseURL is Anthropic's public API.
const DefaultBaseURL = "https://api.anthropic.com/"

// Config configures a Backend.
type Config struct {
	BaseURL    string // "" means DefaultBaseURL
	Model      string
	APIKey     config.Secret
	HTTPClient *http.Client // nil uses http.DefaultClient
}

// Backend sends messages with temperature 0 and a JSON-schema output format (structured
// outputs, `output_config.format`), in the wire format of Anthropic's Messages API.
type Backend struct {
	client *http.Client
	url    string
	header http.Header // x-api-key, anthropic-version
	model  string
	now    func() time.Time
	// noFormat is set once the API rejected output_config (a model without structured
	// outputs); later requests rely on the prompt alone. The judge validates every reply
	// against the schema either way.
	noFormat atomic.Bool
}

// apiVersion is the Messages API version the requests are written for.
const apiVersion = "2023-06-01"

var _ llm.Backend = (*Backend)(nil)

// New returns a Backend. It does not retry: the judge retries, honouring Retry-After.
// Environment variables like ANTHROPIC_BASE_URL are not consulted.
func New(c Config) *Backend {
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	h := http.Header{"User-Agent": {"ragwatch"}, "Anthropic-Version": {apiVersion}}
	if key := c.APIKey.Reveal(); key != "" {
		h.Set("X-Api-Key", key)
	}
	return &Backend{client: hc, url: llm.JoinURL(base, "v1/messages"), header: h, model: c.Model, now: time.Now}
}

// Name implements llm.Backend.
func (b *Backend) Name() string { return "anthropic" }

// Model implements llm.Backend.
func (b *Backend) Model() string { return b.model }

// messagesRequest is the body of POST /v1/messages.
type messagesRequest struct {
	Model        string        `json:"model"`
	MaxTokens    int64         `json:"max_tokens"`
	System       []textBlock   `json:"system,omitempty"`
	Messages     []turn        `json:"messages"`
	Temperature  float64       `json:"temperature"`
	OutputConfig *outputConfig `json:"output_config,omitempty"`
}

type textBlock struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

type turn struct {
	Role    string      `json:"role"`
	Content []textBlock `json:"content"`
}

// outputConfig is {"format":{"type":"json_schema","schema":{...}}}.
type outputConfig struct {
	Format struct {
		Type   string         `json:"type"`
		Schema map[string]any `json:"schema"`
	} `json:"format"`
}

// messagesResponse is what Complete reads of a message.
type messagesResponse struct {
	Content    []textBlock `json:"content"` // blocks of other types carry no text
	StopReason string      `json:"stop_reason"`
	Usage      struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
}

// Complete implements llm.Backend.
func (b *Backend) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	msgs := make([]turn, 0, len(req.Messages))
	for _, m := range req.Messages {
		role := "user"
		if m.Role == "assistant" {
			role = "assistant"
		}
		msgs = append(msgs, turn{Role: role, Content: []textBlock{{Type: "text", Text: m.Content}}})
	}
	maxTokens := int64(req.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = 1024
	}
	params := messagesRequest{Model: b.model, MaxTokens: maxTokens, Messages: msgs}
	if req.System != "" { // the API rejects an empty text block
		params.System = []textBlock{{Type: "text", Text: req.System}}
	}
	format := &outputConfig{}
	format.Format.Type, format.Format.Schema = "json_schema", map[string]any(req.Schema.Wire())
	if !b.noFormat.Load() {
		params.OutputConfig = format
	}
	var resp messagesResponse
	err := llm.PostJSON(ctx, b.client, b.url, b.header, params, &resp, b.now)
	if err != nil && !b.noFormat.Load() && rejectsFormat(err) {
		b.noFormat.Store(true)
		params.OutputConfig = nil
		err = llm.PostJSON(ctx, b.client, b.url, b.header, params, &resp, b.now)
	}
	if err != nil {
		return llm.Response{}, err
	}
	out := llm.Response{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}
	var text strings.Builder
	for _, c := range resp.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	out.Text = text.String()
	if resp.StopReason == "refusal" {
		out.Refusal = "refusal"
	}
	return out, nil
}

// rejectsFormat reports a 400 that complains about the output format.
func rejectsFormat(err error) bool {
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		return false
	}
	msg := strings.ToLower(ae.Body)
	return strings.Contains(msg, "output_config") || strings.Contains(msg, "output_format") || strings.Contains(msg, "structured output")
}
