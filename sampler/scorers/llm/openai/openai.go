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

// Backend sends chat completions with temperature 0 and a JSON-schema response format, in
// the wire format of OpenAI's Chat Completions and Embeddings APIs.
type Backend struct {
	client   *http.Client
	chatURL  string
	embedURL string
	header   http.Header // Authorization, when there is a key
	model    string
	embed    string
	now      func() time.Time
	// plainJSON is set once the server rejected json_schema response formats (some
	// OpenAI-compatible servers do); later requests ask for json_object instead. The judge
	// validates every reply against the schema either way.
	plainJSON atomic.Bool
	// noLogprobs is set once the server rejected logprobs (reasoning models, some
	// OpenAI-compatible servers); judges then fall back to the parsed score.
	noLogprobs atomic.Bool
}

var _ llm.Backend = (*Backend)(nil)

// New returns a Backend. It does not retry: the judge retries, honouring Retry-After, under
// its concurrency cap. Environment variables like OPENAI_BASE_URL are not consulted;
// everything comes from Config.
func New(c Config) *Backend {
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	h := http.Header{"User-Agent": {"ragwatch"}}
	if key := c.APIKey.Reveal(); key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return &Backend{client: hc, chatURL: llm.JoinURL(base, "chat/completions"), embedURL: llm.JoinURL(base, "embeddings"),
		header: h, model: c.Model, embed: c.EmbeddingsModel, now: time.Now}
}

// Name implements llm.Backend.
func (b *Backend) Name() string { return "openai" }

// Model implements llm.Backend.
func (b *Backend) Model() string { return b.model }

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model          string         `json:"model"`
	Messages       []chatMessage  `json:"messages"`
	Temperature    float64        `json:"temperature"`
	MaxTokens      int            `json:"max_tokens,omitempty"`
	Logprobs       bool           `json:"logprobs,omitempty"`
	TopLogprobs    int            `json:"top_logprobs,omitempty"`
	ResponseFormat responseFormat `json:"response_format"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// responseFormat is {"type":"json_schema","json_schema":{"name","schema"}} or
// {"type":"json_object"}.
type responseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *jsonSchema `json:"json_schema,omitempty"`
}

type jsonSchema struct {
	Name   string         `json:"name"`
	Schema map[string]any `json:"schema"`
}

// chatResponse is what Complete reads of a chat.completion.
type chatResponse struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
			Refusal string `json:"refusal"`
		} `json:"message"`
		Logprobs *struct {
			Content []tokenLogprob `json:"content"`
		} `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

type tokenLogprob struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
	} `json:"top_logprobs"`
}

// Complete implements llm.Backend.
func (b *Backend) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	msgs := make([]chatMessage, 0, 1+len(req.Messages))
	msgs = append(msgs, chatMessage{Role: "system", Content: req.System})
	for _, m := range req.Messages {
		role := "user"
		if m.Role == "assistant" {
			role = "assistant"
		}
		msgs = append(msgs, chatMessage{Role: role, Content: m.Content})
	}
	params := chatRequest{Model: b.model, Messages: msgs, MaxTokens: max(req.MaxTokens, 0)}
	if req.TopLogprobs > 0 && !b.noLogprobs.Load() {
		params.Logprobs, params.TopLogprobs = true, min(req.TopLogprobs, 20)
	}
	schemaFormat := responseFormat{Type: "json_schema", JSONSchema: &jsonSchema{Name: req.SchemaName, Schema: map[string]any(req.Schema.Wire())}}
	objectFormat := responseFormat{Type: "json_object"}
	params.ResponseFormat = schemaFormat
	if b.plainJSON.Load() {
		params.ResponseFormat = objectFormat
	}
	var resp chatResponse
	err := b.post(ctx, b.chatURL, params, &resp)
	if err != nil && !b.plainJSON.Load() && rejectsSchema(err) {
		b.plainJSON.Store(true)
		params.ResponseFormat = objectFormat
		err = b.post(ctx, b.chatURL, params, &resp)
	}
	if err != nil && params.Logprobs && rejectsLogprobs(err) {
		b.noLogprobs.Store(true)
		params.Logprobs, params.TopLogprobs = false, 0
		err = b.post(ctx, b.chatURL, params, &resp)
	}
	if err != nil {
		return llm.Response{}, err
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
	if params.Logprobs && ch.Logprobs != nil {
		out.Logprobs = logprobs(ch.Logprobs.Content)
	}
	return out, nil
}

// post sends one request to url and decodes its 2xx reply into out.
func (b *Backend) post(ctx context.Context, url string, in, out any) error {
	return llm.PostJSON(ctx, b.client, url, b.header, in, out, b.now)
}

// Embedder returns the embeddings client, or nil when no embeddings model is configured.
func (b *Backend) Embedder() llm.Embedder {
	if b.embed == "" {
		return nil
	}
	return embedder{b}
}

type embedder struct{ b *Backend }

// embeddingsRequest is the body of POST /embeddings.
type embeddingsRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

type embeddingsResponse struct {
	Data []struct {
		Index     int64     `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int64 `json:"prompt_tokens"`
	} `json:"usage"`
}

// Embed implements llm.Embedder.
func (e embedder) Embed(ctx context.Context, texts []string) ([][]float64, int64, error) {
	var resp embeddingsResponse
	if err := e.b.post(ctx, e.b.embedURL, embeddingsRequest{Model: e.b.embed, Input: texts, EncodingFormat: "float"}, &resp); err != nil {
		return nil, 0, err
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
func logprobs(content []tokenLogprob) []llm.TokenLogprob {
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
func rejectsLogprobs(err error) bool { return rejects(err, "logprobs") }

// rejectsSchema reports a 400 that complains about the response format.
func rejectsSchema(err error) bool { return rejects(err, "response_format", "json_schema") }

// rejects reports a 400 whose body (message, param, type) names one of words.
func rejects(err error, words ...string) bool {
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		return false
	}
	body := strings.ToLower(ae.Body)
	for _, w := range words {
		if strings.Contains(body, w) {
			return true
		}
	}
	return false
}
