package evalexport

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ragwatch/ragwatch/config"
)

// LangfuseScoresPath is Langfuse's public API for creating one score.
const LangfuseScoresPath = "/api/public/scores"

// Langfuse creates Langfuse scores (POST /api/public/scores, basic auth with the project's
// public and secret keys): one request per evaluation, on the trace (Langfuse keeps the OTLP
// trace id of traces it ingests over OpenTelemetry) and, when the record names its turn's
// span, the observation (the span id). The score id is stable (evaluationID), so a batch sent
// again updates the same scores.
type Langfuse struct {
	url  string
	env  string
	post *poster
}

// LangfuseScore is the body of POST /api/public/scores.
type LangfuseScore struct {
	ID            string         `json:"id"`
	TraceID       string         `json:"traceId"`
	ObservationID string         `json:"observationId,omitempty"`
	Name          string         `json:"name"`
	Value         float64        `json:"value"`
	DataType      string         `json:"dataType"`
	Comment       string         `json:"comment,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	Environment   string         `json:"environment,omitempty"`
}

// NewLangfuse builds the Langfuse destination of c (c.Langfuse.URL must be set), reading the
// keys from their env vars or files now; errors name the key, never its value.
func NewLangfuse(c config.Evaluations, m *Metrics) (*Langfuse, error) {
	l := c.Langfuse
	public, err := config.ReadSecret(l.PublicKeyEnv, l.PublicKeyFile)
	if err != nil {
		return nil, fmt.Errorf("evaluations.langfuse.public_key: %w", err)
	}
	secret, err := config.ReadSecret(l.SecretKeyEnv, l.SecretKeyFile)
	if err != nil {
		return nil, fmt.Errorf("evaluations.langfuse.secret_key: %w", err)
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(public.Reveal()+":"+secret.Reveal()))
	header := func(h http.Header) { h.Set("Authorization", auth) }
	return &Langfuse{
		url:  joinURL(l.URL.Reveal(), LangfuseScoresPath),
		env:  l.Environment,
		post: newPoster("langfuse", c.Timeout, c.RetryFor, header, m),
	}, nil
}

// Name implements Destination.
func (l *Langfuse) Name() string { return "langfuse" }

// Send implements Destination: one request per score. A score Langfuse refuses (4xx) does not
// stop the others; once one has used up its retries (Langfuse unreachable or overloaded), the
// rest of the batch is not tried. Either way the error counts what was not created.
func (l *Langfuse) Send(ctx context.Context, batch []Evaluation) error {
	var errs []error
	for i := range batch {
		body, err := json.Marshal(l.score(&batch[i]))
		if err == nil {
			err = l.post.post(ctx, l.url, body)
		}
		if err == nil {
			continue
		}
		errs = append(errs, err)
		if !errors.Is(err, errPermanent) {
			return &PartialError{Failed: len(errs) + len(batch) - i - 1, Err: errors.Join(errs...)}
		}
	}
	if len(errs) > 0 {
		return &PartialError{Failed: len(errs), Err: errors.Join(errs...)}
	}
	return nil
}

func (l *Langfuse) score(ev *Evaluation) LangfuseScore {
	s := LangfuseScore{
		ID: evaluationID(ev), TraceID: ev.TraceID, Name: ev.Name, Value: ev.Value,
		DataType: "NUMERIC", Comment: ev.Explanation, Metadata: metadata(ev), Environment: l.env,
	}
	if _, ok := spanID(ev.SpanID); ok {
		s.ObservationID = ev.SpanID
	}
	if ev.Kind == KindHuman {
		s.Comment = "human label"
	}
	return s
}

// Shutdown implements Destination.
func (l *Langfuse) Shutdown(context.Context) error {
	l.post.client.CloseIdleConnections()
	return nil
}
