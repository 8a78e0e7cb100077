package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// logsReceiver is a real OTLP logs endpoint (the pdata gRPC service) that keeps every record.
type logsReceiver struct {
	plogotlp.UnimplementedGRPCServer
	mu   sync.Mutex
	recs []plog.LogRecord
}

func newLogsReceiver(t *testing.T) (*logsReceiver, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &logsReceiver{}
	srv := grpc.NewServer()
	plogotlp.RegisterGRPCServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r, lis.Addr().String()
}

func (r *logsReceiver) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rls := req.Logs().ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				c := plog.NewLogRecord()
				lrs.At(k).CopyTo(c)
				r.recs = append(r.recs, c)
			}
		}
	}
	return plogotlp.NewExportResponse(), nil
}

// seen lists each received event as "trace span metric scorer kind", sorted.
func (r *logsReceiver) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.recs {
		a := l.Attributes().AsRaw()
		span := "-"
		if !l.SpanID().IsEmpty() {
			span = l.SpanID().String()
		}
		out = append(out, fmt.Sprintf("%s %s %s %s %v %s %v", l.EventName(), l.TraceID(), span,
			a["gen_ai.evaluation.name"], a["ragwatch.evaluation.scorer"], a["ragwatch.evaluator.kind"], a["gen_ai.evaluation.score.value"]))
	}
	sort.Strings(out)
	return out
}

func (r *logsReceiver) explanations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.recs {
		if v, ok := l.Attributes().Get("gen_ai.evaluation.explanation"); ok {
			out = append(out, v.Str())
		}
	}
	return out
}

// TestEvaluationEvents runs the pipeline with evaluations.otlp set: every sampled record's
// judge score and retrieval metric reach a real OTLP logs endpoint once, as
// gen_ai.evaluation.result events on the record's trace and span, with explanations redacted by
// the process's redactor; human labels, one that rode on its record into scoring and one that
// arrives after its record, follow as a person's judgement.
func TestEvaluationEvents(t *testing.T) {
	judge := service.NewFakeJudge(t, func(string) string {
		v, _ := json.Marshal(map[string]any{"reasoning": "It answers the question.", "score": 4})
		return string(v)
	})
	t.Setenv("EVX_JUDGE_KEY", "sk-test")
	logs, addr := newLogsReceiver(t)
	cfg, err := config.Parse([]byte(`
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
sampling: {rate: 1}
scoring:
  workers: 2
  backend: openai
  metrics: [rubric_relevance, mrr]
  openai: {base_url: "` + judge.URL + `/v1/", model: judge-1, api_key_env: EVX_JUDGE_KEY}
evaluations:
  otlp: {endpoint: "` + addr + `", insecure: true}
  flush_interval: 50ms
redaction:
  # No explanation of today's scorers quotes the record; this pattern stands for content
  # the redactor must catch in what the judge wrote.
  patterns: [{name: order_number, regex: "score [0-9]"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.StoreDir = t.TempDir()
	cfg.NATS.Embedded.Endpoint = "127.0.0.1:-1"
	a, err := service.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = a.Shutdown(ctx)
		}
	}()
	// Three records: two turns of one trace (each with its span id) and a trace of one turn.
	recs := []*record.Record{
		{TraceID: "aa000000000000000000000000000001", SpanID: "bb00000000000001", Turn: 1},
		{TraceID: "aa000000000000000000000000000001", SpanID: "bb00000000000002", Turn: 2},
		{TraceID: "aa000000000000000000000000000002"},
	}
	for _, r := range recs {
		r.Service, r.Time, r.Query, r.Answer = "chat", time.Now(), "How do I get a refund?", "Write to jane.doe@example.com."
		r.Documents = []record.Document{{ID: "a", Content: "Refunds: use the form."}, {ID: "b", Content: "Contact support."}}
		r.Relevance = map[string]int{"b": 1} // mrr 0.5
		if r.SpanID == "" {                  // a label that came before its record rides on it into scoring
			r.Labels = &record.Label{Values: map[string]float64{"rubric_relevance": 1}, Labeler: "bo"}
		}
		if err := a.Records.ConsumeRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, r := range recs {
		span := r.SpanID
		if span == "" {
			span = "-"
		}
		want = append(want,
			fmt.Sprintf("gen_ai.evaluation.result %s %s mrr retrieval code 0.5", r.TraceID, span),
			fmt.Sprintf("gen_ai.evaluation.result %s %s rubric_relevance openai llm 0.75", r.TraceID, span))
	}
	want = append(want, fmt.Sprintf("gen_ai.evaluation.result %s - rubric_relevance human human 1", recs[2].TraceID))
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, "each record's two scores", func() error {
		if got := logs.seen(); len(got) < len(want) {
			return fmt.Errorf("%d events: %q", len(got), got)
		}
		return nil
	})
	// A person corrects the judge on the second turn after its record passed the join.
	if err := a.Labels.ConsumeLabel(ctx, record.Label{TraceID: recs[1].TraceID, SpanID: recs[1].SpanID, Service: "chat",
		Values: map[string]float64{"rubric_relevance": 0.25}, Labeler: "ana"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, fmt.Sprintf("gen_ai.evaluation.result %s %s rubric_relevance human human 0.25", recs[1].TraceID, recs[1].SpanID))
	sort.Strings(want)
	// Shutdown sends what is queued.
	stopped = true
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := logs.seen(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant (each once):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ex := logs.explanations()
	sort.Strings(ex)
	wantEx := []string{"2 documents, 1 relevant labels", "2 documents, 1 relevant labels", "2 documents, 1 relevant labels",
		"judge [REDACTED:order_number] of 5", "judge [REDACTED:order_number] of 5", "judge [REDACTED:order_number] of 5"}
	if strings.Join(ex, "|") != strings.Join(wantEx, "|") {
		t.Errorf("explanations %q, want %q", ex, wantEx)
	}
	if got := testutil.Sum(t, a.Registry, "ragwatch_evaluation_exported_total", map[string]string{"destination": "otlp"}); got != float64(len(want)) {
		t.Errorf("ragwatch_evaluation_exported_total = %v, want %d", got, len(want))
	}
}

// TestPairwiseEvaluationEvents: the verdict on a shadow pair the in-process workers judged is
// exported on both records, each from its side.
func TestPairwiseEvaluationEvents(t *testing.T) {
	logs, addr := newLogsReceiver(t)
	cfg := testConfig(t)
	cfg.Sampling.Rate = 1
	cfg.Comparisons = []config.Comparison{{Name: "rerank", Baseline: "v1", Candidate: "v2", Metrics: []string{"faithfulness"},
		Margin: 0.02, Alpha: 0.05, MinSamples: 100, Severity: "ticket"}}
	cfg.Evaluations.OTLP.Endpoint, cfg.Evaluations.OTLP.Insecure = config.SecretURL(addr), true
	cfg.Evaluations.FlushInterval = 20 * time.Millisecond
	e := startEnv(t, cfg)
	docs := []record.Document{{ID: "d1", Content: "The Eiffel Tower is 330 metres tall. It was completed in 1889."}}
	base := &record.Record{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Service: "shop", Variant: "v1", PairID: "p1",
		Query: "How tall is the Eiffel Tower?", Documents: docs, Answer: "The Eiffel Tower is 330 metres tall. Napoleon painted it gold in 1650."}
	cand := &record.Record{TraceID: "5bf92f3577b34da6a3ce929d0e0e4737", Service: "shop", Variant: "v2", PairID: "p1",
		Query: "How tall is the Eiffel Tower?", Documents: docs, Answer: "The Eiffel Tower is 330 metres tall."}
	if err := e.app.Pairs.ConsumePair(context.Background(), cand, base); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"gen_ai.evaluation.result 4bf92f3577b34da6a3ce929d0e0e4736 - pairwise builtin code 0",
		"gen_ai.evaluation.result 5bf92f3577b34da6a3ce929d0e0e4737 - pairwise builtin code 1",
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "the verdict on both records", func() error {
		if got := logs.seen(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			return fmt.Errorf("events %q, want %q", got, want)
		}
		return nil
	})
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, l := range logs.recs {
		lbl, _ := l.Attributes().Get("gen_ai.evaluation.score.label")
		cmpName, _ := l.Attributes().Get("ragwatch.comparison")
		if want := map[bool]string{true: "win", false: "loss"}[l.TraceID().String() == cand.TraceID]; lbl.Str() != want || cmpName.Str() != "rerank" {
			t.Errorf("trace %s: label %q comparison %q, want %q rerank", l.TraceID(), lbl.Str(), cmpName.Str(), want)
		}
	}
}

// TestEvaluationEventsFromWorkerPods: a sidecar that leaves scoring to a `ragwatch worker`
// pod on a shared cluster, both with the export on. The pod exports what it scored; the
// sidecar hears the pod's results on ragwatch.scores.> (its alerts and ring take them) but
// does not export them again: each score leaves once.
func TestEvaluationEventsFromWorkerPods(t *testing.T) {
	ns := testutil.RunJetStream(t)
	podLogs, podAddr := newLogsReceiver(t)
	carLogs, carAddr := newLogsReceiver(t)
	exportTo := func(cfg *config.Config, addr string) {
		cfg.Evaluations.OTLP.Endpoint, cfg.Evaluations.OTLP.Insecure = config.SecretURL(addr), true
		cfg.Evaluations.FlushInterval = 20 * time.Millisecond
	}
	wcfg := workerConfig(ns.ClientURL())
	wcfg.Scoring.Metrics = []string{"faithfulness"}
	exportTo(wcfg, podAddr)
	startPod(t, wcfg)
	ctx := context.Background()

	cfg := podSidecarConfig(t, ns.ClientURL())
	cfg.Scoring.Metrics = []string{"faithfulness"}
	exportTo(cfg, carAddr)
	car := startEnv(t, cfg)
	var want []string
	for i := 1; i <= 3; i++ {
		r := &record.Record{TraceID: fmt.Sprintf("cc%030x", i), Service: "chat", Time: time.Now(), Query: "How do I get a refund?",
			Answer: "Use the refund form.", Documents: []record.Document{{ID: "a", Content: "Refunds: use the refund form."}}}
		if err := car.app.Records.ConsumeRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r.TraceID)
	}
	traces := func(l *logsReceiver) []string {
		var out []string
		for _, s := range l.seen() {
			out = append(out, strings.Fields(s)[1])
		}
		return out
	}
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, "the pod's events", func() error {
		if got := traces(podLogs); strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Errorf("pod exported %q, want %q", got, want)
		}
		return nil
	})
	// The sidecar heard them: its ring holds the pod's results.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "the sidecar's ring", func() error {
		resp, err := http.Get(car.base + "/api/v1/scores?limit=100")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body struct{ Scores []json.RawMessage }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Scores) < 3 {
			return fmt.Errorf("the sidecar's ring holds %d results (%v)", len(body.Scores), err)
		}
		return nil
	})
	if err := car.app.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := carLogs.seen(); len(got) != 0 {
		t.Errorf("the sidecar exported worker pods' results again: %q", got)
	}
}
