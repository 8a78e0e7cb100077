package signals

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/reqsignal"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

const (
	traceA = "4bf92f3577b34da6a3ce929d0e0e4736"
	spanA  = "00f067aa0ba902b7"
	traceB = "0af7651916cd43dd8448eb211c80319c"
)

func score(v float64) *float64 { return &v }

// recordA: 3 documents (two scored: mean 0.5, top 0.75), 27 output tokens, one citation,
// all three stages measured, positive inline feedback.
func recordA() *record.Record {
	return &record.Record{
		TraceID: traceA, SpanID: spanA, Service: "support-bot",
		Query: "capital of France?",
		Documents: []record.Document{
			{ID: "d1", Score: score(0.75), Content: "Paris is the capital of France."},
			{ID: "d2", Score: score(0.25)},
			{ID: "d3"},
		},
		Answer:    "Paris [1].",
		Citations: []record.Citation{{Text: "Paris", DocumentIDs: []string{"d1"}}},
		Usage:     record.Usage{InputTokens: 412, OutputTokens: 27},
		Latency:   record.Latency{Retrieval: 35, Generation: 812, Total: 870},
		Feedback:  &record.Feedback{Score: 1},
	}
}

// recordB: an empty retrieval, an answer of 4 words without usage, only the total measured.
func recordB() *record.Record {
	return &record.Record{
		TraceID: traceB, Service: "support-bot",
		Query:   "anything?",
		Answer:  "I do not\tknow",
		Latency: record.Latency{Total: 120},
	}
}

func newTestSignals(t *testing.T, max int, exp config.Exporters) (*Signals, *prometheus.Registry) {
	t.Helper()
	return newTestSignalsTB(t, max, exp)
}

func newTestSignalsTB(t testing.TB, max int, exp config.Exporters) (*Signals, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := New(Settings{
		Signals:    config.Signals{MaxServices: max},
		Exporters:  exp,
		Services:   cardinality.NewServiceSet(max),
		Registerer: reg,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, reg
}

func consume(t *testing.T, s *Signals, recs ...*record.Record) {
	t.Helper()
	for _, r := range recs {
		if err := s.ConsumeRecord(context.Background(), r); err != nil {
			t.Fatalf("ConsumeRecord: %v", err)
		}
	}
}

func TestObservation(t *testing.T) {
	s, _ := newTestSignals(t, 10, config.Exporters{})
	tests := []struct {
		name string
		rec  *record.Record
		want Observation
	}{
		{"full", recordA(), Observation{
			Service: "support-bot", TraceID: traceA, SpanID: spanA, Request: true,
			Measurement: reqsignal.Measurement{Retrieved: true, Documents: 3, Scored: true, MeanScore: 0.5, TopScore: 0.75,
				Answered: true, AnswerTokens: 27, OutputTokens: 27, InputTokens: 412, CitationsKnown: true, Citations: 1,
				LatencyMS:   [numStages]float64{35, 812, 870},
				HasFeedback: true, FeedbackScore: 1},
			AnswerWords: 2, Sentiment: SentimentPositive,
		}},
		{"empty retrieval, words", recordB(), Observation{
			Service: "support-bot", TraceID: traceB, Request: true,
			Measurement: reqsignal.Measurement{Retrieved: true, Answered: true, AnswerTokens: 4, CitationsKnown: true, LatencyMS: [numStages]float64{0, 0, 120}},
			AnswerWords: 4, Refusal: true,
		}},
		{"no answer, negative top score, unusable ids", &record.Record{
			TraceID: strings.Repeat("a", 65), SpanID: "x", Documents: []record.Document{{ID: "a", Score: score(-2)}, {ID: "b", Score: score(-4)}},
			Feedback: &record.Feedback{Score: -0.5},
		}, Observation{
			Service: "unknown", Request: true,
			Measurement: reqsignal.Measurement{Retrieved: true, Documents: 2, Scored: true, MeanScore: -3, TopScore: -2,
				HasFeedback: true, FeedbackScore: -0.5},
			Sentiment: SentimentNegative,
		}},
		{"non-finite and absurd scores skipped", &record.Record{
			TraceID: traceA, Documents: []record.Document{{ID: "a", Score: score(math.Inf(1))}, {ID: "b", Score: score(math.NaN())},
				{ID: "c", Score: score(-1e300)}, {ID: "d", Score: score(0.25)}},
			Latency: record.Latency{Total: math.Inf(1), Generation: math.NaN()},
		}, Observation{
			Service: "unknown", TraceID: traceA, Request: true,
			Measurement: reqsignal.Measurement{Retrieved: true, Documents: 4, Scored: true, MeanScore: 0.25, TopScore: 0.25},
		}},
		{"unicode words, neutral feedback, negative latency skipped", &record.Record{
			TraceID: "req 1", Answer: " héllo\u00a0wörld  ok ", Latency: record.Latency{Retrieval: -1, Generation: 3},
			Feedback: &record.Feedback{Score: 0},
		}, Observation{
			Service: "unknown", Request: true,
			Measurement: reqsignal.Measurement{Retrieved: true, Answered: true, AnswerTokens: 3, CitationsKnown: true,
				LatencyMS:   [numStages]float64{0, 3, 0},
				HasFeedback: true},
			AnswerWords: 3, Sentiment: SentimentNeutral,
		}},
		{"retrieval not seen", &record.Record{
			TraceID: traceA, Answer: "Refunds take 14 days [1].", RetrievalNotSeen: true,
		}, Observation{
			Service: "unknown", TraceID: traceA, Request: true,
			Measurement: reqsignal.Measurement{Answered: true, AnswerTokens: 5, CitationsKnown: true},
			AnswerWords: 5,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := s.observe(tt.rec)
			o.now = 0 // the exemplars' time (TestExemplarGate)
			o.Request = true
			computeRecord(&o, tt.rec)
			if o != tt.want {
				t.Errorf("observation\n got %+v\nwant %+v", o, tt.want)
			}
		})
	}
}

func TestPrometheusCounters(t *testing.T) {
	s, reg := newTestSignals(t, 2, config.Exporters{})
	other := recordB()
	other.Service = "billing" // third service: over the cap of 2
	search := recordB()
	search.Service = "search"
	consume(t, s, recordA(), recordB(), search, other)
	if err := s.ConsumeFeedback(context.Background(), record.Feedback{TraceID: traceB, Service: "support-bot", Score: -1}); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsumeRecord(context.Background(), nil); err == nil {
		t.Error("ConsumeRecord(nil): want an error")
	}
	want := `
# HELP ragwatch_requests_total RAG requests seen, by service: each record counts 1/p when only a sample with probability p reaches ragwatch (tracestate ot=th, receivers.otlp.upstream_sampling_probability).
# TYPE ragwatch_requests_total counter
ragwatch_requests_total{service="other",variant=""} 1
ragwatch_requests_total{service="search",variant=""} 1
ragwatch_requests_total{service="support-bot",variant=""} 2
# HELP ragwatch_empty_retrievals_total Requests whose retrieval was seen and whose final context holds no document (weighted like ragwatch_requests_total).
# TYPE ragwatch_empty_retrievals_total counter
ragwatch_empty_retrievals_total{service="other",variant=""} 1
ragwatch_empty_retrievals_total{service="search",variant=""} 1
ragwatch_empty_retrievals_total{service="support-bot",variant=""} 1
# HELP ragwatch_feedback_total User feedback received, by sentiment (score > 0 positive, < 0 negative, 0 neutral).
# TYPE ragwatch_feedback_total counter
ragwatch_feedback_total{sentiment="negative",service="other",variant=""} 0
ragwatch_feedback_total{sentiment="negative",service="search",variant=""} 0
ragwatch_feedback_total{sentiment="negative",service="support-bot",variant=""} 1
ragwatch_feedback_total{sentiment="neutral",service="other",variant=""} 0
ragwatch_feedback_total{sentiment="neutral",service="search",variant=""} 0
ragwatch_feedback_total{sentiment="neutral",service="support-bot",variant=""} 0
ragwatch_feedback_total{sentiment="positive",service="other",variant=""} 0
ragwatch_feedback_total{sentiment="positive",service="search",variant=""} 0
ragwatch_feedback_total{sentiment="positive",service="support-bot",variant=""} 1
# HELP ragwatch_statsd_errors_total statsd lines or packets that could not be sent (dropped, never retried).
# TYPE ragwatch_statsd_errors_total counter
ragwatch_statsd_errors_total 0
`
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(want),
		"ragwatch_requests_total", "ragwatch_empty_retrievals_total", "ragwatch_feedback_total", "ragwatch_statsd_errors_total"); err != nil {
		t.Error(err)
	}
}

func TestPrometheusHistograms(t *testing.T) {
	s, reg := newTestSignals(t, 10, config.Exporters{})
	consume(t, s, recordA(), recordB())
	want := `
# HELP ragwatch_retrieved_documents Documents in the final context of a request.
# TYPE ragwatch_retrieved_documents histogram
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="0"} 1
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="1"} 1
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="2"} 1
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="3"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="4"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="5"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="6"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="8"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="10"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="15"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="20"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="30"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="50"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="100"} 2
ragwatch_retrieved_documents_bucket{service="support-bot",variant="",le="+Inf"} 2
ragwatch_retrieved_documents_sum{service="support-bot",variant=""} 3
ragwatch_retrieved_documents_count{service="support-bot",variant=""} 2
# HELP ragwatch_citations_per_answer Citations per answer (requests with an answer).
# TYPE ragwatch_citations_per_answer histogram
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="0"} 1
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="1"} 2
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="2"} 2
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="3"} 2
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="4"} 2
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="5"} 2
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="7"} 2
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="10"} 2
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="15"} 2
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="20"} 2
ragwatch_citations_per_answer_bucket{service="support-bot",variant="",le="+Inf"} 2
ragwatch_citations_per_answer_sum{service="support-bot",variant=""} 1
ragwatch_citations_per_answer_count{service="support-bot",variant=""} 2
`
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(want),
		"ragwatch_retrieved_documents", "ragwatch_citations_per_answer"); err != nil {
		t.Error(err)
	}

	// The other histograms: exact count, sum and the bucket each value fell into.
	type hist struct {
		count uint64
		sum   float64
		le    map[float64]uint64 // upper bound -> cumulative count
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   hist
	}{
		{"ragwatch_retrieval_score", map[string]string{"service": "support-bot"},
			hist{1, 0.5, map[float64]uint64{0.4: 0, 0.5: 1}}},
		{"ragwatch_retrieval_top_score", map[string]string{"service": "support-bot"},
			hist{1, 0.75, map[float64]uint64{0.7: 0, 0.75: 1}}},
		{"ragwatch_answer_tokens", map[string]string{"service": "support-bot"},
			hist{2, 31, map[float64]uint64{10: 1, 25: 1, 50: 2}}},
		{"ragwatch_request_duration_seconds", map[string]string{"service": "support-bot", "stage": "retrieval"},
			hist{1, 0.035, map[float64]uint64{0.025: 0, 0.05: 1}}},
		{"ragwatch_request_duration_seconds", map[string]string{"service": "support-bot", "stage": "generation"},
			hist{1, 0.812, map[float64]uint64{0.5: 0, 1: 1}}},
		{"ragwatch_request_duration_seconds", map[string]string{"service": "support-bot", "stage": "total"},
			hist{2, 0.99, map[float64]uint64{0.1: 0, 0.25: 1, 0.5: 1, 1: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name+labelString(tt.labels), func(t *testing.T) {
			m := testutil.Series(t, reg, tt.name, tt.labels)
			h := m.GetHistogram()
			if h.GetSampleCount() != tt.want.count || !approx(h.GetSampleSum(), tt.want.sum) {
				t.Errorf("count, sum = %d, %v; want %d, %v", h.GetSampleCount(), h.GetSampleSum(), tt.want.count, tt.want.sum)
			}
			seen := 0
			for _, b := range h.GetBucket() {
				if want, ok := tt.want.le[b.GetUpperBound()]; ok {
					seen++
					if b.GetCumulativeCount() != want {
						t.Errorf("bucket le=%v = %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
					}
				}
			}
			if seen != len(tt.want.le) {
				t.Errorf("found %d of the %d expected bucket bounds", seen, len(tt.want.le))
			}
		})
	}
}

// approx compares sums of a few float observations, which may differ from the literal in the
// last bit (0.87 + 0.12).
func approx(a, b float64) bool {
	d := a - b
	return d < 1e-12 && d > -1e-12
}

func labelString(l map[string]string) string {
	var b strings.Builder
	for _, k := range []string{"service", "stage", "sentiment"} {
		if v, ok := l[k]; ok {
			b.WriteString("/" + v)
		}
	}
	return b.String()
}

// TestPrometheusExemplars scrapes /metrics as OpenMetrics, the way Prometheus does with
// exemplar storage enabled, and finds the trace id on the duration, score and feedback series.
func TestPrometheusExemplars(t *testing.T) {
	s, reg := newTestSignals(t, 10, config.Exporters{})
	consume(t, s, recordA())
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("content type %q", ct)
	}
	text := string(body)
	// The exemplar's label order is not fixed (client_golang ranges over a map).
	exemplars := []string{
		`{span_id="` + spanA + `",trace_id="` + traceA + `"}`,
		`{trace_id="` + traceA + `",span_id="` + spanA + `"}`,
	}
	for _, tt := range []struct{ series, value string }{
		{`ragwatch_request_duration_seconds_bucket{service="support-bot",stage="total",variant="",le="1.0"} 1`, "0.87"},
		{`ragwatch_request_duration_seconds_bucket{service="support-bot",stage="retrieval",variant="",le="0.05"} 1`, "0.035"},
		{`ragwatch_request_duration_seconds_bucket{service="support-bot",stage="generation",variant="",le="1.0"} 1`, "0.812"},
		{`ragwatch_retrieval_score_bucket{service="support-bot",variant="",le="0.5"} 1`, "0.5"},
		{`ragwatch_retrieval_top_score_bucket{service="support-bot",variant="",le="0.75"} 1`, "0.75"},
		{`ragwatch_feedback_total{sentiment="positive",service="support-bot",variant=""} 1.0`, "1.0"},
	} {
		if !hasLinePrefix(text, tt.series+" # "+exemplars[0]+" "+tt.value+" ") &&
			!hasLinePrefix(text, tt.series+" # "+exemplars[1]+" "+tt.value+" ") {
			t.Errorf("no exemplar %s %s on\n%s\nin\n%s", exemplars[0], tt.value, tt.series,
				grepLines(text, "ragwatch_request_duration_seconds_bucket", "ragwatch_retrieval_score_bucket", "ragwatch_feedback_total"))
		}
	}
	// Counts of documents carry no exemplar: one would say nothing a trace id adds to.
	if strings.Contains(grepLines(text, "ragwatch_retrieved_documents"), "#") {
		t.Errorf("unexpected exemplar on ragwatch_retrieved_documents")
	}
}

func hasLinePrefix(text, prefix string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

func grepLines(text string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	t.Run("shutdown without start", func(t *testing.T) {
		s, _ := newTestSignals(t, 10, config.Exporters{})
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatalf("second Shutdown: %v", err)
		}
		if err := s.Start(ctx); err == nil {
			t.Fatal("Start after Shutdown: want an error")
		}
	})
	t.Run("start twice", func(t *testing.T) {
		s, _ := newTestSignals(t, 10, config.Exporters{})
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err == nil {
			t.Fatal("second Start: want an error")
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("duplicate registration", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if _, err := New(Settings{Registerer: reg, Signals: config.Signals{MaxServices: 1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := New(Settings{Registerer: reg, Signals: config.Signals{MaxServices: 1}}); err == nil {
			t.Fatal("second New on one registry: want an error")
		}
	})
	t.Run("bad statsd tag format", func(t *testing.T) {
		_, err := New(Settings{Registerer: prometheus.NewRegistry(), Exporters: config.Exporters{
			Statsd: config.Statsd{Endpoint: "127.0.0.1:8125", TagFormat: "xml"}}})
		if err == nil || err.Error() != `signals: statsd tag_format must be datadog, influx, graphite or none, got "xml"` {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestExemplarGate: a bucket takes at most one exemplar per ExemplarInterval; a bucket seen
// for the first time always takes one.
func TestExemplarGate(t *testing.T) {
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	s, err := New(Settings{Signals: config.Signals{MaxServices: 10}, Registerer: reg, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(trace string, totalMS float64) *record.Record {
		return &record.Record{TraceID: trace, Service: "svc", Answer: "a", Latency: record.Latency{Total: totalMS}}
	}
	exemplar := func(le float64) string {
		t.Helper()
		m := testutil.Series(t, reg, "ragwatch_request_duration_seconds", map[string]string{"service": "svc", "stage": "total"})
		for _, b := range m.GetHistogram().GetBucket() {
			if b.GetUpperBound() == le {
				if b.GetExemplar() == nil {
					return ""
				}
				return b.GetExemplar().GetLabel()[0].GetValue() + fmt.Sprintf("@%v", b.GetExemplar().GetValue())
			}
		}
		t.Fatalf("no bucket le=%v", le)
		return ""
	}
	t1, t2, t3, t4 := strings.Repeat("1", 32), strings.Repeat("2", 32), strings.Repeat("3", 32), strings.Repeat("4", 32)
	consume(t, s, rec(t1, 800))
	clock = clock.Add(ExemplarInterval - time.Nanosecond)
	consume(t, s, rec(t2, 900))  // same bucket (le=1) within the interval: no new exemplar
	consume(t, s, rec(t3, 4000)) // a bucket (le=5) seen for the first time: exemplar
	if got, want := exemplar(1), t1+"@0.8"; got != want {
		t.Errorf("le=1 exemplar %s, want %s", got, want)
	}
	if got, want := exemplar(5), t3+"@4"; got != want {
		t.Errorf("le=5 exemplar %s, want %s", got, want)
	}
	clock = clock.Add(time.Nanosecond) // the interval since t1 has passed
	consume(t, s, rec(t4, 950))
	if got, want := exemplar(1), t4+"@0.95"; got != want {
		t.Errorf("le=1 exemplar after the interval %s, want %s", got, want)
	}
	if got := exemplar(0.5); got != "" {
		t.Errorf("le=0.5 exemplar %s, want none", got)
	}
}

// A record kept upstream with probability p stands for 1/p requests in the request counts; its
// distributions are observed once.
func TestPrometheusCountsWeighUpstreamSampling(t *testing.T) {
	s, reg := newTestSignals(t, 4, config.Exporters{})
	sampled := recordB() // no documents: an empty retrieval too
	sampled.UpstreamProbability = 0.25
	consume(t, s, sampled, recordB())
	if got := testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"service": "support-bot"}); got != 5 {
		t.Errorf("ragwatch_requests_total = %v, want 5 (4 for the sampled record, 1 for the other)", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_empty_retrievals_total", map[string]string{"service": "support-bot"}); got != 5 {
		t.Errorf("ragwatch_empty_retrievals_total = %v, want 5", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_retrieved_documents", map[string]string{"service": "support-bot"}); got != 2 {
		t.Errorf("ragwatch_retrieved_documents observations = %v, want 2", got)
	}
}

// Refusals count like requests: a record kept upstream with probability p counts 1/p; an answer
// that only looks like one ("I don't know why ...") is not counted.
func TestPrometheusRefusalsWeighUpstreamSampling(t *testing.T) {
	s, reg := newTestSignals(t, 4, config.Exporters{})
	sampled := recordB() // "I do not know"
	sampled.UpstreamProbability = 0.25
	notRefusal := recordB()
	notRefusal.Answer = "I don't know why you'd wait: refunds take 5 days."
	consume(t, s, sampled, recordB(), notRefusal)
	if got := testutil.Sum(t, reg, "ragwatch_refusals_total", map[string]string{"service": "support-bot"}); got != 5 {
		t.Errorf("ragwatch_refusals_total = %v, want 5 (4 for the sampled record, 1 for the other)", got)
	}
}

// observe is the Observation ConsumeRecord starts from for r, at the Settings' clock.
func (s *Signals) observe(r *record.Record) Observation {
	return s.observeFeedback(r.Service, r.TraceID, r.SpanID, r.Feedback, s.set.Now())
}
