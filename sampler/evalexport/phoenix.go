package evalexport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/ragwatch/ragwatch/config"
)

// Phoenix's REST API for annotations.
const (
	PhoenixSpanAnnotationsPath  = "/v1/span_annotations"
	PhoenixTraceAnnotationsPath = "/v1/trace_annotations"
)

// Phoenix creates Phoenix annotations: span annotations (POST /v1/span_annotations) on the
// turn's span when the record names it, trace annotations (POST /v1/trace_annotations)
// otherwise, one request per kind and batch. The identifier ("ragwatch:<scorer>") makes
// Phoenix update the annotation of the same name, span and scorer instead of adding one when
// a batch is sent again, and keeps a human label beside the judge's annotation.
type Phoenix struct {
	spans, traces string
	post          *poster
}

// PhoenixAnnotation is one element of the `data` array of both requests.
type PhoenixAnnotation struct {
	SpanID        string         `json:"span_id,omitempty"`
	TraceID       string         `json:"trace_id,omitempty"`
	Name          string         `json:"name"`
	AnnotatorKind string         `json:"annotator_kind"` // LLM, CODE or HUMAN
	Result        PhoenixResult  `json:"result"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	Identifier    string         `json:"identifier"`
}

// PhoenixResult is an annotation's result.
type PhoenixResult struct {
	Label       string  `json:"label,omitempty"`
	Score       float64 `json:"score"`
	Explanation string  `json:"explanation,omitempty"`
}

// NewPhoenix builds the Phoenix destination of c (c.Phoenix.URL must be set), reading the API
// key, if any, now.
func NewPhoenix(c config.Evaluations, m *Metrics) (*Phoenix, error) {
	p := c.Phoenix
	key, err := config.ReadSecret(p.APIKeyEnv, p.APIKeyFile)
	if err != nil {
		return nil, fmt.Errorf("evaluations.phoenix.api_key: %w", err)
	}
	header := func(http.Header) {}
	if key != "" {
		auth := "Bearer " + key.Reveal()
		header = func(h http.Header) { h.Set("Authorization", auth) }
	}
	base := p.URL.Reveal()
	return &Phoenix{
		spans:  joinURL(base, PhoenixSpanAnnotationsPath),
		traces: joinURL(base, PhoenixTraceAnnotationsPath),
		post:   newPoster("phoenix", c.Timeout, c.RetryFor, header, m),
	}, nil
}

// Name implements Destination.
func (p *Phoenix) Name() string { return "phoenix" }

// Send implements Destination.
func (p *Phoenix) Send(ctx context.Context, batch []Evaluation) error {
	var spans, traces []PhoenixAnnotation
	for i := range batch {
		ev := &batch[i]
		a := PhoenixAnnotation{
			Name:          ev.Name,
			AnnotatorKind: strings.ToUpper(ev.Kind),
			Result:        PhoenixResult{Label: ev.Label, Score: ev.Value, Explanation: ev.Explanation},
			Metadata:      metadata(ev),
			Identifier:    "ragwatch:" + ev.Scorer,
		}
		if _, ok := spanID(ev.SpanID); ok {
			a.SpanID = ev.SpanID
			spans = append(spans, a)
		} else {
			a.TraceID = ev.TraceID
			traces = append(traces, a)
		}
	}
	for _, req := range []struct {
		url  string
		data []PhoenixAnnotation
	}{{p.spans, spans}, {p.traces, traces}} {
		if len(req.data) == 0 {
			continue
		}
		body, err := json.Marshal(map[string]any{"data": req.data})
		if err != nil {
			return fmt.Errorf("phoenix: encode annotations: %w", err)
		}
		if err := p.post.post(ctx, req.url, body); err != nil {
			return err
		}
	}
	return nil
}

// Shutdown implements Destination.
func (p *Phoenix) Shutdown(context.Context) error {
	p.post.client.CloseIdleConnections()
	return nil
}
