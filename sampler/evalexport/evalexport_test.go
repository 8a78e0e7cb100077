package evalexport

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/redact"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	trace1 = "0af7651916cd43dd8448eb211c80319c"
	span1  = "b7ad6b7169203331"
	trace2 = "5b8efff798038103d269b633813fc60c"
)

var at = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

// results are one of each kind of scorer: an LLM judge whose explanation quotes an e-mail
// address (on a turn's span), the builtin scorer (a trace with one turn), a retrieval metric.
func results() []score.Result {
	return []score.Result{
		{TraceID: trace1, SpanID: span1, ResponseID: "chatcmpl-1", Service: "shop", Variant: "v2", Metric: score.Faithfulness, Value: 0.25,
			Weight: 10, Scorer: "openai", Model: "gpt-4o-mini", Method: score.MethodLogprobs, JudgeVersion: "j1",
			Explanation: "The claim about refunds, sent to jane.doe@example.com, is not in the context.", Time: at},
		{TraceID: trace2, Service: "shop", Metric: score.RefusalCorrect, Value: 1, Weight: 1, Scorer: "builtin", Time: at},
		{TraceID: trace2, Service: "shop", Metric: "ndcg@10", Value: 0.5, Weight: 1, Scorer: "retrieval", Time: at},
	}
}

func testConfig() config.Evaluations {
	c := config.Default().Evaluations
	c.FlushInterval = 20 * time.Millisecond
	c.Timeout = 5 * time.Second
	c.RetryFor = 5 * time.Second
	return c
}

func redactor(t *testing.T) func(string) string {
	t.Helper()
	r, err := redact.New(config.Default().Redaction.Detectors, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.String
}

func metrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// logsServer is an OTLP logs receiver: the pdata gRPC service on a free loopback port.
type logsServer struct {
	plogotlp.UnimplementedGRPCServer
	mu   sync.Mutex
	logs []plog.Logs
	fail atomic.Int32 // answer this many exports with UNAVAILABLE first
}

func (s *logsServer) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	if s.fail.Add(-1) >= 0 {
		return plogotlp.NewExportResponse(), status.Error(codes.Unavailable, "try again")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := plog.NewLogs()
	req.Logs().CopyTo(l)
	s.logs = append(s.logs, l)
	return plogotlp.NewExportResponse(), nil
}

// event is a received log record, flattened for comparison.
type event struct {
	Name, TraceID, SpanID string
	Scope, Service        string
	Attrs                 map[string]any
	Time                  time.Time
}

func (s *logsServer) events() []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return flatten(s.logs)
}

func flatten(all []plog.Logs) []event {
	var out []event
	for _, l := range all {
		for i := 0; i < l.ResourceLogs().Len(); i++ {
			rl := l.ResourceLogs().At(i)
			svc, _ := rl.Resource().Attributes().Get("service.name")
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				sl := rl.ScopeLogs().At(j)
				for k := 0; k < sl.LogRecords().Len(); k++ {
					r := sl.LogRecords().At(k)
					e := event{Name: r.EventName(), Scope: sl.Scope().Name(), Service: svc.AsString(),
						Attrs: r.Attributes().AsRaw(), Time: r.Timestamp().AsTime().UTC()}
					if !r.TraceID().IsEmpty() {
						e.TraceID = r.TraceID().String()
					}
					if !r.SpanID().IsEmpty() {
						e.SpanID = r.SpanID().String()
					}
					out = append(out, e)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TraceID != out[j].TraceID {
			return out[i].TraceID < out[j].TraceID
		}
		return out[i].Attrs[AttrEvaluationName].(string)+out[i].Attrs[AttrScorer].(string) <
			out[j].Attrs[AttrEvaluationName].(string)+out[j].Attrs[AttrScorer].(string)
	})
	return out
}

// wantEvents are the events of results() and one human label of faithfulness on trace1, in
// the order flatten sorts them.
func wantEvents() []event {
	scope := instrumentationScope
	return []event{
		{Name: EventName, TraceID: trace1, SpanID: span1, Scope: scope, Service: "ragwatch", Time: at.Add(time.Minute), Attrs: map[string]any{
			AttrEvaluationName: "faithfulness", AttrScoreValue: 0.9, AttrScorer: "human", AttrEvaluatorKind: "human",
			AttrWeight: 1.0, AttrService: "shop",
		}},
		{Name: EventName, TraceID: trace1, SpanID: span1, Scope: scope, Service: "ragwatch", Time: at, Attrs: map[string]any{
			AttrEvaluationName: "faithfulness", AttrScoreValue: 0.25,
			AttrExplanation: "The claim about refunds, sent to [REDACTED:email], is not in the context.",
			AttrScorer:      "openai", AttrEvaluatorKind: "llm", AttrWeight: 10.0, AttrModel: "gpt-4o-mini",
			AttrMethod: "logprobs", AttrJudgeVersion: "j1", AttrService: "shop", AttrVariant: "v2",
			AttrResponseID: "chatcmpl-1",
		}},
		{Name: EventName, TraceID: trace2, Scope: scope, Service: "ragwatch", Time: at, Attrs: map[string]any{
			AttrEvaluationName: "ndcg@10", AttrScoreValue: 0.5, AttrScorer: "retrieval", AttrEvaluatorKind: "code",
			AttrWeight: 1.0, AttrService: "shop",
		}},
		{Name: EventName, TraceID: trace2, Scope: scope, Service: "ragwatch", Time: at, Attrs: map[string]any{
			AttrEvaluationName: "refusal_correct", AttrScoreValue: 1.0, AttrScoreLabel: "correct", AttrScorer: "builtin",
			AttrEvaluatorKind: "code", AttrWeight: 1.0, AttrService: "shop",
		}},
	}
}

func humanLabel() record.Label {
	return record.Label{TraceID: trace1, SpanID: span1, Service: "shop", Labeler: "jane.doe@example.com",
		Values: map[string]float64{score.Faithfulness: 0.9}, Time: at.Add(time.Minute)}
}

// feed starts e, hands it the results and the label, and shuts it down (which sends all).
func feed(t *testing.T, e *Exporter) {
	t.Helper()
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.ConsumeScores(ctx, results()); err != nil {
		t.Fatal(err)
	}
	if err := e.ConsumeLabel(ctx, humanLabel()); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := e.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
}

func TestOTLPGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	logs := &logsServer{}
	logs.fail.Store(1) // the first export is answered UNAVAILABLE: the SDK exporter retries it
	plogotlp.RegisterGRPCServer(srv, logs)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	c := testConfig()
	c.OTLP.Endpoint = config.SecretURL(lis.Addr().String())
	c.OTLP.Insecure = true
	c.OTLP.Headers = map[string]config.Secret{"x-api-key": "k"}
	m, reg := metrics(t)
	e, err := New(Settings{Config: c, Redact: redactor(t), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, e)
	if diff := cmp.Diff(wantEvents(), logs.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := testutil.Sum(t, reg, "ragwatch_evaluation_exported_total", map[string]string{"destination": "otlp"}); got != 4 {
		t.Errorf("exported = %v, want 4", got)
	}
}

func TestOTLPHTTP(t *testing.T) {
	var mu sync.Mutex
	var got []plog.Logs
	var header http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad request "+r.URL.Path, http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		req := plogotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got, header = append(got, req.Logs()), r.Header.Clone()
		mu.Unlock()
		out, _ := plogotlp.NewExportResponse().MarshalProto()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	defer srv.Close()

	c := testConfig()
	c.OTLP.Endpoint = config.SecretURL(srv.URL) // a URL: its path is /v1/logs by default
	c.OTLP.Protocol = "http"
	c.OTLP.Headers = map[string]config.Secret{"x-api-key": "k"}
	e, err := New(Settings{Config: c, Redact: redactor(t)})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, e)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(wantEvents(), flatten(got)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if header.Get("X-Api-Key") != "k" {
		t.Errorf("header x-api-key = %q", header.Get("X-Api-Key"))
	}
}

// requests records the JSON bodies an httptest server received, by path.
type requests struct {
	mu     sync.Mutex
	bodies map[string][]json.RawMessage
	auth   []string
	// status answers the n-th request (from 0); nil or out of range: 200.
	status []int
}

func (q *requests) handler() http.Handler {
	n := atomic.Int32{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if i < len(q.status) && q.status[i] != 200 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "no", q.status[i])
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want POST JSON", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.bodies == nil {
			q.bodies = map[string][]json.RawMessage{}
		}
		q.bodies[r.URL.Path] = append(q.bodies[r.URL.Path], body)
		q.auth = append(q.auth, r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"id":"x"}`))
	})
}

func decode[T any](t *testing.T, raw []json.RawMessage) []T {
	t.Helper()
	out := make([]T, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
	}
	return out
}

func TestLangfuse(t *testing.T) {
	q := &requests{}
	srv := httptest.NewServer(q.handler())
	defer srv.Close()
	t.Setenv("LF_PUBLIC", "pk-lf-1")
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("sk-lf-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testConfig()
	c.Langfuse = config.EvaluationsLangfuse{URL: config.SecretURL(srv.URL + "/"), PublicKeyEnv: "LF_PUBLIC",
		SecretKeyFile: file, Environment: "production"}
	e, err := New(Settings{Config: c, Redact: redactor(t)})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, e)

	q.mu.Lock()
	defer q.mu.Unlock()
	got := decode[LangfuseScore](t, q.bodies[LangfuseScoresPath])
	if len(got) != 4 || len(q.bodies) != 1 {
		t.Fatalf("requests: %v", q.bodies)
	}
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("pk-lf-1:sk-lf-2"))
	for _, a := range q.auth {
		if a != wantAuth {
			t.Fatalf("Authorization = %q, want %q", a, wantAuth)
		}
	}
	judge := results()[0]
	want := LangfuseScore{
		ID:      evaluationID(&Evaluation{TraceID: trace1, SpanID: span1, Name: "faithfulness", Scorer: "openai", Kind: KindLLM}),
		TraceID: trace1, ObservationID: span1, Name: "faithfulness", Value: 0.25, DataType: "NUMERIC",
		Comment:     "The claim about refunds, sent to [REDACTED:email], is not in the context.",
		Environment: "production",
		Metadata: map[string]any{"scorer": "openai", "evaluator_kind": "llm", "weight": 10.0, "model": judge.Model,
			"method": "logprobs", "judge_version": "j1", "service": "shop", "variant": "v2", "response_id": "chatcmpl-1"},
	}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("judge score (-want +got):\n%s", diff)
	}
	// Results are queued in order, then the label: the human correction is the fourth.
	human := got[3]
	if human.Name != "faithfulness" || human.Value != 0.9 || human.Metadata["evaluator_kind"] != "human" ||
		human.ID == want.ID || human.ObservationID != span1 || human.Comment != "human label" {
		t.Errorf("human label score = %+v", human)
	}
	if got[1].ObservationID != "" || got[1].TraceID != trace2 {
		t.Errorf("a record without a span id scores the trace: %+v", got[1])
	}
}

func TestPhoenix(t *testing.T) {
	q := &requests{}
	srv := httptest.NewServer(q.handler())
	defer srv.Close()
	t.Setenv("PHOENIX_KEY", "px-key")
	c := testConfig()
	c.Phoenix = config.EvaluationsPhoenix{URL: config.SecretURL(srv.URL), APIKeyEnv: "PHOENIX_KEY"}
	e, err := New(Settings{Config: c, Redact: redactor(t)})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, e)

	q.mu.Lock()
	defer q.mu.Unlock()
	type body struct{ Data []PhoenixAnnotation }
	var spans, traces []PhoenixAnnotation
	for _, b := range decode[body](t, q.bodies[PhoenixSpanAnnotationsPath]) {
		spans = append(spans, b.Data...)
	}
	for _, b := range decode[body](t, q.bodies[PhoenixTraceAnnotationsPath]) {
		traces = append(traces, b.Data...)
	}
	for _, a := range q.auth {
		if a != "Bearer px-key" {
			t.Fatalf("Authorization = %q", a)
		}
	}
	want := []PhoenixAnnotation{
		{SpanID: span1, Name: "faithfulness", AnnotatorKind: "LLM", Identifier: "ragwatch:openai",
			Result: PhoenixResult{Score: 0.25, Explanation: "The claim about refunds, sent to [REDACTED:email], is not in the context."},
			Metadata: map[string]any{"scorer": "openai", "evaluator_kind": "llm", "weight": 10.0, "model": "gpt-4o-mini",
				"method": "logprobs", "judge_version": "j1", "service": "shop", "variant": "v2", "response_id": "chatcmpl-1"}},
		{SpanID: span1, Name: "faithfulness", AnnotatorKind: "HUMAN", Identifier: "ragwatch:human",
			Result:   PhoenixResult{Score: 0.9},
			Metadata: map[string]any{"scorer": "human", "evaluator_kind": "human", "weight": 1.0, "service": "shop"}},
	}
	if diff := cmp.Diff(want, spans); diff != "" {
		t.Errorf("span annotations (-want +got):\n%s", diff)
	}
	if len(traces) != 2 || traces[0].TraceID != trace2 || traces[0].Name != "refusal_correct" ||
		traces[0].Result.Label != "correct" || traces[0].AnnotatorKind != "CODE" || traces[1].Name != "ndcg@10" {
		t.Errorf("trace annotations = %+v", traces)
	}
}

// TestRetries: 429 and 5xx are sent again (Retry-After honoured), a 4xx is not, and a batch
// given up on is counted, never logged with its key.
func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name                string
		status              []int
		exported, retries   float64
		failures, dropped   float64
		bodies              int
		retryFor            time.Duration
		wantLogHasNoSecrets bool
	}{
		{name: "5xx then 429 then ok", status: []int{503, 429}, exported: 1, retries: 2, bodies: 1, retryFor: 5 * time.Second},
		{name: "401 is permanent", status: []int{401}, failures: 1, dropped: 1, retryFor: 5 * time.Second},
		{name: "retries spent", status: []int{500, 500, 500, 500, 500, 500, 500, 500}, failures: 1, dropped: 1, retries: 1, retryFor: 150 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &requests{status: tc.status}
			srv := httptest.NewServer(q.handler())
			defer srv.Close()
			t.Setenv("LF_PUBLIC", "pk-lf-SECRET")
			t.Setenv("LF_SECRET", "sk-lf-SECRET")
			c := testConfig()
			c.RetryFor = tc.retryFor
			c.Langfuse = config.EvaluationsLangfuse{URL: config.SecretURL(srv.URL), PublicKeyEnv: "LF_PUBLIC", SecretKeyEnv: "LF_SECRET"}
			m, reg := metrics(t)
			var logs testutil.Buffer
			lf, err := NewLangfuse(c, m)
			if err != nil {
				t.Fatal(err)
			}
			lf.post.backoff = 50 * time.Millisecond
			e, err := NewWith(Settings{Config: c, Metrics: m, Logger: slogTo(&logs)}, lf)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			_ = e.ConsumeScores(context.Background(), results()[:1])
			if err := e.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			lbl := map[string]string{"destination": "langfuse"}
			for name, want := range map[string]float64{
				"ragwatch_evaluation_exported_total":        tc.exported,
				"ragwatch_evaluation_export_retries_total":  tc.retries,
				"ragwatch_evaluation_export_failures_total": tc.failures,
			} {
				if got := testutil.Sum(t, reg, name, lbl); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			if got := testutil.Sum(t, reg, "ragwatch_evaluation_export_dropped_total", map[string]string{"destination": "langfuse", "reason": ReasonExportFailed}); got != tc.dropped {
				t.Errorf("dropped = %v, want %v", got, tc.dropped)
			}
			if len(q.bodies[LangfuseScoresPath]) != tc.bodies {
				t.Errorf("accepted requests = %d, want %d", len(q.bodies[LangfuseScoresPath]), tc.bodies)
			}
			if s := logs.String(); strings.Contains(s, "SECRET") || strings.Contains(s, "refunds") {
				t.Errorf("the log shows a secret or content: %s", s)
			}
			if tc.failures > 0 && !strings.Contains(logs.String(), "evaluation export failed") {
				t.Errorf("no log line for the failed batch: %s", logs.String())
			}
		})
	}
}

// blocking is a destination that waits for release before taking each batch.
type blocking struct {
	release chan struct{}
	mu      sync.Mutex
	got     []Evaluation
}

func (b *blocking) Name() string { return "test" }
func (b *blocking) Send(ctx context.Context, batch []Evaluation) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, batch...)
	return nil
}
func (b *blocking) Shutdown(context.Context) error { return nil }

// TestBoundedQueue: the queue never blocks the caller; what does not fit is dropped and
// counted, what was queued is sent at shutdown; offers after shutdown are counted too.
func TestBoundedQueue(t *testing.T) {
	c := testConfig()
	c.QueueSize = 2
	m, reg := metrics(t)
	d := &blocking{release: make(chan struct{})}
	close(d.release)
	e, err := NewWith(Settings{Config: c, Metrics: m}, d)
	if err != nil {
		t.Fatal(err)
	}
	// Not started: nothing drains the queue.
	done := make(chan struct{})
	go func() {
		_ = e.ConsumeScores(context.Background(), append(results(), results()...)) // 6 results
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ConsumeScores blocked on a full queue")
	}
	dropped := func(reason string) float64 {
		return testutil.Sum(t, reg, "ragwatch_evaluation_export_dropped_total", map[string]string{"destination": "test", "reason": reason})
	}
	if got := dropped(ReasonQueueFull); got != 4 {
		t.Errorf("queue_full = %v, want 4", got)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(d.got) != 2 || d.got[0].Name != score.Faithfulness || d.got[1].Name != score.RefusalCorrect {
		t.Errorf("sent %+v", d.got)
	}
	_ = e.ConsumeScores(context.Background(), results()[:1])
	if got := dropped(ReasonStopped); got != 1 {
		t.Errorf("stopped = %v, want 1", got)
	}
}

// TestShutdownDeadline: a destination that never answers does not hold Shutdown past its
// context; the batch is counted as export_failed.
func TestShutdownDeadline(t *testing.T) {
	c := testConfig()
	m, reg := metrics(t)
	d := &blocking{release: make(chan struct{})} // never released
	e, _ := NewWith(Settings{Config: c, Metrics: m}, d)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = e.ConsumeScores(context.Background(), results())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Shutdown took %s", took)
	}
	if got := testutil.Sum(t, reg, "ragwatch_evaluation_export_dropped_total", map[string]string{"destination": "test", "reason": ReasonExportFailed}); got != 3 {
		t.Errorf("export_failed = %v, want 3", got)
	}
}

func TestNoTrace(t *testing.T) {
	c := testConfig()
	m, reg := metrics(t)
	d := &blocking{release: make(chan struct{})}
	close(d.release)
	e, _ := NewWith(Settings{Config: c, Metrics: m}, d)
	_ = e.Start(context.Background())
	bad := results()
	bad[0].TraceID = "order-1234"                       // an API record's own id
	bad[1].TraceID = strings.ToUpper(trace2)            // not OTLP's lowercase hex
	bad[2].TraceID = "00000000000000000000000000000000" // invalid
	_ = e.ConsumeScores(context.Background(), append(bad, results()[0]))
	_ = e.Shutdown(context.Background())
	if got := testutil.Sum(t, reg, "ragwatch_evaluation_export_dropped_total", map[string]string{"destination": "test", "reason": ReasonNoTrace}); got != 3 {
		t.Errorf("no_trace = %v, want 3", got)
	}
	if len(d.got) != 1 || d.got[0].TraceID != trace1 {
		t.Errorf("sent %+v", d.got)
	}
}

func TestLifecycle(t *testing.T) {
	c := testConfig()
	d := &blocking{release: make(chan struct{})}
	close(d.release)
	e, _ := NewWith(Settings{Config: c}, d)
	// Shutdown without Start, twice.
	for range 2 {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Start(context.Background()); err == nil {
		t.Error("Start after Shutdown succeeded")
	}
	if e, err := New(Settings{Config: config.Default().Evaluations}); e != nil || err != nil {
		t.Errorf("New with nothing set = %v, %v; want nil, nil", e, err)
	}
}

func TestSecretsMissing(t *testing.T) {
	c := testConfig()
	c.Langfuse = config.EvaluationsLangfuse{URL: "https://lf.example", PublicKeyEnv: "RW_UNSET_PUBLIC", SecretKeyEnv: "RW_UNSET_SECRET"}
	_, err := New(Settings{Config: c})
	if err == nil || !strings.Contains(err.Error(), "evaluations.langfuse.public_key: environment variable RW_UNSET_PUBLIC is not set") {
		t.Errorf("err = %v", err)
	}
	c = testConfig()
	c.Phoenix = config.EvaluationsPhoenix{URL: "http://phoenix:6006", APIKeyFile: "/nonexistent/key"}
	if _, err := New(Settings{Config: c}); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v", err)
	}
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestPairVerdict: a shadow pair's verdict is one evaluation on each record, from its side.
func TestPairVerdict(t *testing.T) {
	d := &blocking{release: make(chan struct{})}
	close(d.release)
	e, _ := NewWith(Settings{Config: testConfig(), Now: func() time.Time { return at }}, d)
	_ = e.Start(context.Background())
	a := &record.Record{TraceID: trace1, SpanID: span1, Service: "shop", Variant: "v1"}
	b := &record.Record{TraceID: trace2, Service: "shop", Variant: "v2"}
	e.ConsumePairVerdict(context.Background(), "canary", a, b,
		pairwise.Verdict{Winner: pairwise.WinnerB, Outcome: pairwise.Win, Reasoning: "B cites its source.", Judge: "openai", Model: "gpt-4o"}, 4)
	e.ConsumePairVerdict(context.Background(), "canary", a, b, pairwise.Verdict{Outcome: pairwise.Inconsistent, Judge: "builtin"}, 4)
	_ = e.Shutdown(context.Background())
	want := []Evaluation{
		{TraceID: trace2, Service: "shop", Variant: "v2", Name: "pairwise", Value: 1, Label: "win", Explanation: "B cites its source.",
			Scorer: "openai", Model: "gpt-4o", Weight: 4, Kind: KindLLM, Time: at, Comparison: "canary"},
		{TraceID: trace1, SpanID: span1, Service: "shop", Variant: "v1", Name: "pairwise", Value: 0, Label: "loss", Explanation: "B cites its source.",
			Scorer: "openai", Model: "gpt-4o", Weight: 4, Kind: KindLLM, Time: at, Comparison: "canary"},
		{TraceID: trace2, Service: "shop", Variant: "v2", Name: "pairwise", Value: 0.5, Label: "inconsistent",
			Scorer: "builtin", Weight: 4, Kind: KindCode, Time: at, Comparison: "canary"},
		{TraceID: trace1, SpanID: span1, Service: "shop", Variant: "v1", Name: "pairwise", Value: 0.5, Label: "inconsistent",
			Scorer: "builtin", Weight: 4, Kind: KindCode, Time: at, Comparison: "canary"},
	}
	if diff := cmp.Diff(want, d.got); diff != "" {
		t.Errorf("evaluations (-want +got):\n%s", diff)
	}
}

// TestLangfusePartial: a score Langfuse refuses does not take the rest of the batch with it,
// and the counters say how many were created.
func TestLangfusePartial(t *testing.T) {
	q := &requests{status: []int{200, 400, 200}}
	srv := httptest.NewServer(q.handler())
	defer srv.Close()
	t.Setenv("LF_PUBLIC", "pk")
	t.Setenv("LF_SECRET", "sk")
	c := testConfig()
	c.Langfuse = config.EvaluationsLangfuse{URL: config.SecretURL(srv.URL), PublicKeyEnv: "LF_PUBLIC", SecretKeyEnv: "LF_SECRET"}
	m, reg := metrics(t)
	e, err := New(Settings{Config: c, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.Start(context.Background())
	_ = e.ConsumeScores(context.Background(), results())
	_ = e.Shutdown(context.Background())
	lbl := map[string]string{"destination": "langfuse"}
	if got := testutil.Sum(t, reg, "ragwatch_evaluation_exported_total", lbl); got != 2 {
		t.Errorf("exported = %v, want 2", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_evaluation_export_dropped_total", map[string]string{"destination": "langfuse", "reason": ReasonExportFailed}); got != 1 {
		t.Errorf("export_failed = %v, want 1", got)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if got := decode[LangfuseScore](t, q.bodies[LangfuseScoresPath]); len(got) != 2 || got[0].Name != "faithfulness" || got[1].Name != "ndcg@10" {
		t.Errorf("created %+v", got)
	}
}
