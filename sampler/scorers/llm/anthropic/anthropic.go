// Package anthropic is the judge backend for Anthropic's Messages API.
package anthropic

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

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
// outputs, `output_config.format`).
type Backend struct {
	client sdk.Client
	model  string
	now    func() time.Time
	// noFormat is set once the API rejected output_config (a model without structured
	// outputs); later requests rely on the prompt alone. The judge validates every reply
	// against the schema either way.
	noFormat atomic.Bool
}

var _ llm.Backend = (*Backend)(nil)

// New returns a Backend. The SDK's own retries are off: the judge retries, honouring
// Retry-After. Environment variables like ANTHROPIC_BASE_URL are not consulted.
func New(c Config) *Backend {
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	client := sdk.NewClient(
		option.WithBaseURL(base),
		option.WithAPIKey(c.APIKey.Reveal()),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	)
	return &Backend{client: client, model: c.Model, now: time.Now}
}

// Name implements llm.Backend.
func (b *Backend) Name() string { return "anthropic" }

// Model implements llm.Backend.
func (b *Backend) Model() string { return b.model }

// Complete implements llm.Backend.
func (b *Backend) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	msgs := make([]sdk.MessageParam, 0, len(req.Messages))
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			msgs = append(msgs, sdk.NewAssistantMessage(sdk.NewTextBlock(m.Content)))
		} else {
			msgs = append(msgs, sdk.NewUserMessage(sdk.NewTextBlock(m.Content)))
		}
	}
	maxTokens := int64(req.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = 1024
	}
	params := sdk.MessageNewParams{
		Model:       sdk.Model(b.model),
		MaxTokens:   maxTokens,
		System:      []sdk.TextBlockParam{{Text: req.System}},
		Messages:    msgs,
		Temperature: sdk.Float(0),
	}
	format := sdk.OutputConfigParam{Format: sdk.JSONOutputFormatParam{Schema: map[string]any(req.Schema.Wire())}}
	if !b.noFormat.Load() {
		params.OutputConfig = format
	}
	resp, err := b.client.Messages.New(ctx, params)
	if err != nil && !b.noFormat.Load() && rejectsFormat(err) {
		b.noFormat.Store(true)
		params.OutputConfig = sdk.OutputConfigParam{}
		resp, err = b.client.Messages.New(ctx, params)
	}
	if err != nil {
		return llm.Response{}, b.convert(err)
	}
	out := llm.Response{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}
	var text strings.Builder
	for _, c := range resp.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	out.Text = text.String()
	if resp.StopReason == sdk.StopReasonRefusal {
		out.Refusal = "refusal"
	}
	return out, nil
}

// rejectsFormat reports a 400 that complains about the output format.
func rejectsFormat(err error) bool {
	var ae *sdk.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		return false
	}
	msg := strings.ToLower(ae.RawJSON())
	return strings.Contains(msg, "output_config") || strings.Contains(msg, "output_format") || strings.Contains(msg, "structured output")
}

// convert turns the SDK's error into *llm.APIError (status, Retry-After, short message).
func (b *Backend) convert(err error) error {
	var ae *sdk.Error
	if errors.As(err, &ae) {
		e := &llm.APIError{Status: ae.StatusCode, Message: llm.ShortMessage(ae.RawJSON())}
		if ae.Response != nil {
			e.RetryAfter = llm.ParseRetryAfter(ae.Response.Header, b.now())
		}
		return e
	}
	return err
}
