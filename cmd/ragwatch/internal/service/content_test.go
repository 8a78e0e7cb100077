package service_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// contentSpans is a RAG turn whose retriever names two documents with ids.
func contentSpans() []sp {
	return []sp{
		{name: "chain", start: 0, end: 500, attrs: []attribute.KeyValue{s("openinference.span.kind", "CHAIN")}},
		{name: "retriever", parent: 1, start: 5, end: 40, attrs: []attribute.KeyValue{
			s("openinference.span.kind", "RETRIEVER"),
			s("input.value", "Does Enterprise include SSO?"),
			s("retrieval.documents.0.document.id", "ent"),
			f64("retrieval.documents.0.document.score", 0.8),
			s("retrieval.documents.0.document.content", "Enterprise costs $50 and includes SSO."),
			s("retrieval.documents.1.document.id", "pro"),
			s("retrieval.documents.1.document.content", "Pro costs $20 a month."),
		}},
		{name: "llm", parent: 1, start: 50, end: 490, attrs: []attribute.KeyValue{
			s("openinference.span.kind", "LLM"),
			s("llm.output_messages.0.message.role", "assistant"),
			s("llm.output_messages.0.message.content", "Yes, Enterprise includes SSO [1]."),
		}},
	}
}

// TestTextsKeptForWhatMayBeScored sends traces through the OTel SDK to the gRPC receiver of the
// running app at sampling.rate 0.5: documents' texts are kept for the trace its id samples and
// for the one a label waits for, and not for the third, which keeps its document ids, scores
// and count. Both kept traces are scored; nothing is skipped for want of content. With export
// on, every trace keeps its texts.
func TestTextsKeptForWhatMayBeScored(t *testing.T) {
	for _, export := range []bool{false, true} {
		t.Run(fmt.Sprintf("export=%v", export), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Sampling.Rate = 0.5
			cfg.Export.Enabled = export
			e := startEnv(t, cfg)
			// The randomness of a trace id is its last seven bytes: all ones is sampled at
			// any rate above 0, all zeros at none below 1.
			sampled := trace.TraceID{0xc1, 1, 9: 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			labelled, plain := trace.TraceID{0xc1, 2}, trace.TraceID{0xc1, 3}
			resp, err := http.Post(e.base+"/api/v1/labels", "application/json",
				strings.NewReader(`{"trace_id":"`+labelled.String()+`","values":{"faithfulness":1}}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("POST /api/v1/labels = %d %s", resp.StatusCode, body)
			}
			snd := newSender(t, "grpc", e.app.Addrs().OTLPGRPC, "chat")
			for _, tid := range []trace.TraceID{sampled, labelled, plain} {
				snd.send(t, tid, contentSpans())
			}
			testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "three records", func() bool { return e.sink.len() == 3 })
			for _, tid := range []trace.TraceID{sampled, labelled, plain} {
				r := e.sink.get(tid.String())
				if r == nil || len(r.Documents) != 2 || r.Documents[0].ID != "ent" || r.Documents[1].ID != "pro" ||
					r.Documents[0].Score == nil || *r.Documents[0].Score != 0.8 || r.Answer != "Yes, Enterprise includes SSO [1]." {
					t.Fatalf("record of %s: %+v", tid, r)
				}
				want := [2]string{"Enterprise costs $50 and includes SSO.", "Pro costs $20 a month."}
				if tid == plain && !export {
					want = [2]string{}
				}
				if got := [2]string{r.Documents[0].Content, r.Documents[1].Content}; got != want {
					t.Errorf("trace %s: texts %q, want %q", tid, got, want)
				}
			}
			testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "both kept traces scored", func() error {
				got := scrape(t, e.base)
				ok := got[`ragwatch_scoring_attempts_total{outcome="ok",scorer="builtin"}`]
				rate, lab := got[`ragwatch_sampled_total{reason="rate",service="chat"}`], got[`ragwatch_sampled_total{reason="labelled",service="chat"}`]
				if ok != 2 || rate != 1 || lab != 1 || got[`ragwatch_sampling_skipped_total{reason="no_content"}`] != 0 {
					return fmt.Errorf("scored %v, sampled by rate %v, labelled %v, no_content %v", ok, rate, lab, got[`ragwatch_sampling_skipped_total{reason="no_content"}`])
				}
				return nil
			})
		})
	}
}
