// Package openai is the judge backend for OpenAI and every OpenAI-compatible chat API (Azure
// OpenAI's v1 endpoint, vLLM, Ollama, llama.cpp server, LiteLLM), with optional embeddings.
package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// DefaultBaseURL is OpenAI's public API.
const DefaultBaseURL = "https://api.openai.com/v1/"

// Config configures a Backend.
type Config struct {
	BaseURL         string // "" means DefaultBaseURL
	Model           string
	APIKey          config.Secret // may be empty for local servers
	EmbeddingsModel string        // "" disables Embedder
	HTTPClient      *http.Client  // nil uses http.DefaultClient
}

// Backend sends chat completions with temperature 0 and a JSON-schema response format.
type Backend struct {
	client oai.Client
	model  string
	embed  string
	now    func() time.Time
	// plainJSON is set once the server rejected json_schema response formats (some
	// OpenAI-compatible servers do); later requests ask for json_object instead. The judge
	// validates every reply against the schema either way.
	plainJSON atomic.Bool
	// noLogprobs is set once the server rejected logprobs (reasoning models, some
	// OpenAI-compatible servers); judges then fall back to the parsed score.
	noLogprobs atomic.Bool
}

var _ llm.Backend = (*Backend)(nil)

// New returns a Backend. The SDK's own retries are off: the judge retries, honouring
// Retry-After, under its concurrency cap. Environment variables like OPENAI_BASE_URL are not
// consulted; everything comes from Config.
func New(c Config) *Backend {
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	client := oai.NewClient(
		option.WithBaseURL(base),
		option.WithAPIKey(c.APIKey.Reveal()),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	)
	return &Backend{client: client, model: c.Model, embed: c.EmbeddingsModel, now: time.Now}
}

// Name implements llm.Backend.
func (b *Backend) Name() string { return "openai" }

// Model implements llm.Backend.
func (b *Backend) Model() string { return b.model }

// Complete implements llm.Backend.
func (b *Backend) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	msgs := []oai.ChatCompletionMessageParamUnion{oai.SystemMessage(req.System)}
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			msgs = append(msgs, oai.AssistantMessage(m.Content))
		} else {
			msgs = append(msgs, oai.UserMessage(m.Content))
		}
	}
	params := oai.ChatCompletionNewParams{
		Model:       shared.ChatModel(b.model),
		Messages:    msgs,
		Temperature: oai.Float(0),
	}
	if req.MaxTokens > 0 {
		params.MaxTokens = oai.Int(int64(req.MaxTokens))
	}
	if req.TopLogprobs > 0 && !b.noLogprobs.Load() {
		params.Logprobs = oai.Bool(true)
		params.TopLogprobs = oai.Int(int64(min(req.TopLogprobs, 20)))
	}
	schemaFormat := oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: req.SchemaName, Schema: map[string]any(req.Schema.Wire())},
	}}
	objectFormat := oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	params.ResponseFormat = schemaFormat
	if b.plainJSON.Load() {
		params.ResponseFormat = objectFormat
	}
	resp, err := b.client.Chat.Completions.New(ctx, params)
	if err != nil && !b.plainJSON.Load() && rejectsSchema(err) {
		b.plainJSON.Store(true)
		params.ResponseFormat = objectFormat
		resp, err = b.client.Chat.Completions.New(ctx, params)
	}
	if err != nil && params.Logprobs.Valid() && rejectsLogprobs(err) {
		b.noLogprobs.Store(true)
		params.Logprobs, params.TopLogprobs = param.Opt[bool]{}, param.Opt[int64]{}
		resp, err = b.client.Chat.Completions.New(ctx, params)
	}
	if err != nil {
		return llm.Response{}, b.convert(err)
	}
	out := llm.Response{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}
	if len(resp.Choices) == 0 {
		return out, errors.New("openai: reply has no choices")
	}
	ch := resp.Choices[0]
	out.Text, out.Refusal = ch.Message.Content, ch.Message.Refusal
	if out.Refusal == "" && ch.FinishReason == "content_filter" {
		out.Refusal = "content_filter"
	}
	if params.Logprobs.Valid() {
		out.Logprobs = logprobs(ch.Logprobs.Content)
	}
	return out, nil
}

// Embedder returns the embeddings client, or nil when no embeddings model is configured.
func (b *Backend) Embedder() llm.Embedder {
	if b.embed == "" {
		return nil
	}
	return embedder{b}
}

type embedder struct{ b *Backend }

// Embed implements llm.Embedder.
func (e embedder) Embed(ctx context.Context, texts []string) ([][]float64, int64, error) {
	resp, err := e.b.client.Embeddings.New(ctx, oai.EmbeddingNewParams{
		Model:          oai.EmbeddingModel(e.b.embed),
		Input:          oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: oai.EmbeddingNewParamsEncodingFormatFloat,
	})
	if err != nil {
		return nil, 0, e.b.convert(err)
	}
	out := make([][]float64, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || int(d.Index) >= len(texts) {
			return nil, resp.Usage.PromptTokens, fmt.Errorf("openai embeddings: index %d out of range", d.Index)
		}
		out[d.Index] = d.Embedding
	}
	for i, v := range out {
		if v == nil {
			return nil, resp.Usage.PromptTokens, fmt.Errorf("openai embeddings: no vector for input %d", i)
		}
	}
	return out, resp.Usage.PromptTokens, nil
}

// logprobs converts the wire form choices[0].logprobs.content[i].{token, logprob,
// top_logprobs[j].{token, logprob}}; nil when the server sent none.
func logprobs(content []oai.ChatCompletionTokenLogprob) []llm.TokenLogprob {
	if len(content) == 0 {
		return nil
	}
	out := make([]llm.TokenLogprob, len(content))
	for i, c := range content {
		t := llm.TokenLogprob{Token: c.Token, Logprob: c.Logprob, Top: make([]llm.TopLogprob, len(c.TopLogprobs))}
		for j, a := range c.TopLogprobs {
			t.Top[j] = llm.TopLogprob{Token: a.Token, Logprob: a.Logprob}
		}
		out[i] = t
	}
	return out
}

// rejectsLogprobs reports a 400 that complains about logprobs.
func rejectsLogprobs(err error) bool {
	var ae *oai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		return false
	}
	return strings.Contains(strings.ToLower(ae.Message+" "+ae.Param+" "+ae.RawJSON()), "logprobs")
}

// rejectsSchema reports a 400 that complains about the response format.
func rejectsSchema(err error) bool {
	var ae *oai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		return false
	}
	msg := strings.ToLower(ae.Message + " " + ae.Param + " " + ae.RawJSON())
	return strings.Contains(msg, "response_format") || strings.Contains(msg, "json_schema")
}

// convert turns the SDK's error into *llm.APIError (status, Retry-After, short message).
func (b *Backend) convert(err error) error {
	var ae *oai.Error
	if errors.As(err, &ae) {
		e := &llm.APIError{Status: ae.StatusCode, Message: llm.ShortMessage(ae.Message)}
		if ae.Response != nil {
			e.RetryAfter = llm.ParseRetryAfter(ae.Response.Header, b.now())
		}
		return e
	}
	return err
}
