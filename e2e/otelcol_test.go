//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ragwatch/ragwatch/internal/synth"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// buildCollector builds the pinned OpenTelemetry Collector of scripts/otelcol (its own module:
// the product module never depends on the Collector). The first build on a machine downloads
// and compiles the load-balancing exporter's dependency tree (Kubernetes client, AWS SDK):
// about 6.5 CPU-minutes, so 4 minutes on 2 idle cores; later builds reuse GOCACHE and take
// 10 to 20 seconds.
func buildCollector(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "otelcol")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = "../scripts/otelcol"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the Collector (scripts/otelcol): %v\n%s", err, out)
	}
	t.Logf("built the Collector in %s", time.Since(start).Round(time.Second))
	return bin
}

// startCollector runs the Collector on one of deploy/otelcol's configs, as shipped, with env
// setting its endpoints, and waits until its own metrics endpoint answers.
func startCollector(t *testing.T, bin, config string, env map[string]string) *process {
	t.Helper()
	metrics := testutil.FreeAddr(t)
	host, port, _ := net.SplitHostPort(metrics)
	vars := append(os.Environ(), "OTELCOL_METRICS_HOST="+host, "OTELCOL_METRICS_PORT="+port)
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	p := startEnv(t, vars, bin, "--config", "../deploy/otelcol/"+config)
	waitHTTP(t, "http://"+metrics+"/metrics")
	return p
}

// replica is one ragwatch process with its own embedded NATS.
type replica struct {
	name string
	otlp string // OTLP gRPC endpoint
	http string // base URL of the API and /metrics
}

const replicaConfig = `
receivers:
  otlp:
    grpc: { endpoint: %q }
    http: { endpoint: "" }
http:
  endpoint: %q
  api_endpoint: ""
nats:
  store_dir: %q
  embedded: { endpoint: %q }
assembly:
  wait: 300ms
  timeout: 4s
sampling:
  rate: 1.0
scoring:
  workers: 1
  backend: builtin
  recent: { size: 1000 }
`

func startReplica(t *testing.T, bin, name string) *replica {
	t.Helper()
	dir := t.TempDir()
	r := &replica{name: name, otlp: testutil.FreeAddr(t)}
	httpAddr := testutil.FreeAddr(t)
	r.http = "http://" + httpAddr
	cfg := writeFile(t, dir, "ragwatch.yaml", fmt.Sprintf(replicaConfig, r.otlp, httpAddr, filepath.Join(dir, "data"), testutil.FreeAddr(t)))
	start(t, bin, "run", "-c", cfg, "--log-format", "json")
	waitHTTP(t, r.http+"/readyz")
	return r
}

// metrics scrapes the replica's /metrics as a Gatherer for testutil.Sum.
func (r *replica) metrics(t *testing.T) prometheus.Gatherer {
	t.Helper()
	b, code, err := httpGet(r.http + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("%s: GET /metrics: %d %v", r.name, code, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: parse /metrics: %v", r.name, err)
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		out := make([]*dto.MetricFamily, 0, len(fams))
		for _, f := range fams {
			out = append(out, f)
		}
		return out, nil
	})
}

func (r *replica) sum(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return testutil.Sum(t, r.metrics(t), name, labels)
}

// scoredTraces returns the trace ids of the scores the replica holds (GET /api/v1/scores):
// with sampling.rate 1, one per record it assembled.
func (r *replica) scoredTraces(t *testing.T) map[string]bool {
	t.Helper()
	b, code, err := httpGet(r.http + "/api/v1/scores?limit=1000")
	if err != nil || code != 200 {
		t.Fatalf("%s: GET /api/v1/scores: %d %v %s", r.name, code, err, b)
	}
	var resp struct {
		Scores []struct {
			TraceID string `json:"trace_id"`
		} `json:"scores"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatalf("%s: /api/v1/scores: %v", r.name, err)
	}
	out := map[string]bool{}
	for _, s := range resp.Scores {
		out[s.TraceID] = true
	}
	return out
}

// ragTraces makes n synthetic OpenInference traces (root, retriever, LLM) of service, split
// into exports the way a batching SDK or an agent Collector splits them: the children of every
// trace first, over several requests, and the roots last in requests of their own.
func ragTraces(n int, service string, seed uint64) (exports []ptrace.Traces, ids []string) {
	gen := synth.New(synth.Options{Seed: seed, Service: service})
	now := time.Now()
	children := []ptrace.Traces{ptrace.NewTraces(), ptrace.NewTraces(), ptrace.NewTraces()}
	roots := []ptrace.Traces{ptrace.NewTraces(), ptrace.NewTraces()}
	for i := 0; i < n; i++ {
		turn := gen.Next(now)
		turn.Start = now.Add(-turn.Total)
		full := ptrace.NewTraces()
		synth.AppendTraces(full, &turn)
		ids = append(ids, hex.EncodeToString(turn.TraceID[:]))
		// Each child goes to its own export: a trace's spans are spread over every request.
		k := 0
		moveSpans(full, func(s ptrace.Span) ptrace.Traces {
			if s.ParentSpanID().IsEmpty() {
				return roots[i%len(roots)]
			}
			k++
			return children[(i+k)%len(children)]
		})
	}
	return append(children, roots...), ids
}

// setTraceState sets the W3C tracestate of every span of td.
func setTraceState(td ptrace.Traces, ts string) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			spans := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				spans.At(k).TraceState().FromRaw(ts)
			}
		}
	}
}

// moveSpans copies every span of td, with its resource and scope, into the Traces dst picks.
func moveSpans(td ptrace.Traces, dst func(ptrace.Span) ptrace.Traces) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				s := ss.Spans().At(k)
				out := dst(s).ResourceSpans().AppendEmpty()
				rs.Resource().CopyTo(out.Resource())
				outScope := out.ScopeSpans().AppendEmpty()
				ss.Scope().CopyTo(outScope.Scope())
				s.CopyTo(outScope.Spans().AppendEmpty())
			}
		}
	}
}

// plainTraces makes n three-span traces of a service that does no RAG (an HTTP server span and
// two client spans), in one export.
func plainTraces(n int, service string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	ss := rs.ScopeSpans().AppendEmpty()
	now := time.Now()
	for i := 0; i < n; i++ {
		var tid pcommon.TraceID
		copy(tid[:], fmt.Sprintf("plain-trace-%04d", i))
		for j, name := range []string{"GET /cart", "SELECT cart", "POST /payments"} {
			s := ss.Spans().AppendEmpty()
			s.SetTraceID(tid)
			s.SetSpanID(pcommon.SpanID{byte(i >> 8), byte(i), byte(j + 1), 1, 2, 3, 4, 5})
			if j > 0 {
				s.SetParentSpanID(pcommon.SpanID{byte(i >> 8), byte(i), 1, 1, 2, 3, 4, 5})
				s.SetKind(ptrace.SpanKindClient)
			} else {
				s.SetKind(ptrace.SpanKindServer)
			}
			s.SetName(name)
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
			s.Attributes().PutStr("http.request.method", "GET")
		}
	}
	return td
}

// genAIEvents makes the log records the official GenAI instrumentations emit for the
// generations of exports (a gen_ai.user.message named by the event.name attribute and a
// gen_ai.choice named by OTLP's event_name, both records of the generation span), with one plain
// log line per trace, all under the resource of service.
func genAIEvents(exports []ptrace.Traces, service string) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", service)
	recs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, td := range exports {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					s := sss.At(j).Spans().At(k)
					if s.ParentSpanID().IsEmpty() {
						line := recs.AppendEmpty()
						line.SetTraceID(s.TraceID())
						line.SetSpanID(s.SpanID())
						line.Body().SetStr("POST /ask 200")
					}
					if kind, _ := s.Attributes().Get("openinference.span.kind"); kind.Str() != "LLM" {
						continue
					}
					user := recs.AppendEmpty()
					user.SetTraceID(s.TraceID())
					user.SetSpanID(s.SpanID())
					user.Attributes().PutStr("event.name", "gen_ai.user.message")
					user.Body().SetEmptyMap().PutStr("content", "the question")
					choice := recs.AppendEmpty()
					choice.SetTraceID(s.TraceID())
					choice.SetSpanID(s.SpanID())
					choice.SetEventName("gen_ai.choice")
					choice.Body().SetEmptyMap().PutEmptyMap("message").PutStr("content", "the answer")
				}
			}
		}
	}
	return ld
}

// exportLogs sends ld as one OTLP gRPC log export.
func exportLogs(t *testing.T, endpoint string, ld plog.Logs) {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(ld)); err != nil {
		t.Fatalf("export %d log records to %s: %v", ld.LogRecordCount(), endpoint, err)
	}
}

// export sends each Traces as one OTLP gRPC export request, in order.
func export(t *testing.T, endpoint string, batches ...ptrace.Traces) {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	for i, td := range batches {
		if td.SpanCount() == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
		cancel()
		if err != nil {
			t.Fatalf("export %d (%d spans) to %s: %v", i, td.SpanCount(), endpoint, err)
		}
	}
}

// backend is an OTLP gRPC server standing for a team's tracing backend: it counts spans by
// service.name.
type backend struct {
	ptraceotlp.UnimplementedGRPCServer
	addr string
	mu   sync.Mutex
	n    map[string]int
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{addr: l.Addr().String(), n: map[string]int{}}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, b)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return b
}

func (b *backend) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	td := req.Traces()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		svc, _ := rs.Resource().Attributes().Get("service.name")
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			b.n[svc.Str()] += rs.ScopeSpans().At(j).Spans().Len()
		}
	}
	return ptraceotlp.NewExportResponse(), nil
}

func (b *backend) spans(service string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n[service]
}

// TestCollectorTopologies runs ragwatch behind a real OpenTelemetry Collector built from the
// module proxy, with the configs of deploy/otelcol as shipped.
func TestCollectorTopologies(t *testing.T) {
	otelcol := buildCollector(t)
	ragwatch := buildRagwatch(t)

	t.Run("kubernetes variant is a valid config", func(t *testing.T) {
		cmd := exec.Command(otelcol, "validate", "--config", "../deploy/otelcol/loadbalancing-k8s.yaml")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("otelcol validate loadbalancing-k8s.yaml: %v\n%s", err, out)
		}
	})

	t.Run("load balancing by trace id over two replicas", func(t *testing.T) {
		// The spans and the GenAI events (log records) of a trace reach one replica: the
		// config routes both by the trace id copied into an attribute, since the exporter
		// hashes the traceID key of a span and of a log record differently.
		a, b := startReplica(t, ragwatch, "replica-a"), startReplica(t, ragwatch, "replica-b")
		col := testutil.FreeAddr(t)
		startCollector(t, otelcol, "loadbalancing.yaml", map[string]string{
			"OTELCOL_OTLP_GRPC": col, "RAGWATCH_A": a.otlp, "RAGWATCH_B": b.otlp,
		})
		const n = 40
		exports, ids := ragTraces(n, "support-bot", 7)
		began := time.Now()
		// The events first, as an app's log exporter usually sends them; the plain log line of
		// each trace is filtered out before the load balancer.
		exportLogs(t, col, genAIEvents(exports, "support-bot"))
		export(t, col, exports...)

		replicas := []*replica{a, b}
		assembled := func() (total float64, each []float64) {
			for _, r := range replicas {
				v := r.sum(t, "ragwatch_records_total", map[string]string{"outcome": "assembled"})
				each = append(each, v)
				total += v
			}
			return total, each
		}
		testutil.CheckFor(t, 60*time.Second, 200*time.Millisecond, "every trace assembled", func() error {
			if total, each := assembled(); total < n {
				return fmt.Errorf("assembled %v of %d", each, n)
			}
			return nil
		})
		t.Logf("%d traces assembled %s after the export began", n, time.Since(began).Round(time.Millisecond))
		// A trace split over the replicas would leave a rootless part held until
		// assembly.timeout (4s), then assembled as partial: wait until nothing is held.
		// Signals are recorded just after a record is counted as assembled.
		testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, "no trace held, every request recorded", func() error {
			var requests float64
			for _, r := range replicas {
				if v := r.sum(t, "ragwatch_assembly_traces_held", nil); v != 0 {
					return fmt.Errorf("%s holds %v traces", r.name, v)
				}
				requests += r.sum(t, "ragwatch_requests_total", nil)
			}
			if requests < n {
				return fmt.Errorf("ragwatch_requests_total %v of %d", requests, n)
			}
			return nil
		})
		total, each := assembled()
		if total != n || each[0] == 0 || each[1] == 0 {
			t.Errorf("assembled per replica %v, want a split of exactly %d over both", each, n)
		}
		var requests float64
		for _, r := range replicas {
			for _, m := range []struct {
				name   string
				labels map[string]string
			}{
				{"ragwatch_records_total", map[string]string{"outcome": "partial"}},
				{"ragwatch_records_total", map[string]string{"outcome": "not_rag"}},
				{"ragwatch_assembly_released_total", map[string]string{"reason": "timeout"}},
				{"ragwatch_late_spans_total", nil},
				// A root without its retriever would make a record without documents.
				{"ragwatch_empty_retrievals_total", nil},
			} {
				if v := r.sum(t, m.name, m.labels); v != 0 {
					t.Errorf("%s: %s%v = %v, want 0: a trace was split or delivered twice", r.name, m.name, m.labels, v)
				}
			}
			requests += r.sum(t, "ragwatch_requests_total", nil)
		}
		if requests != n {
			t.Errorf("ragwatch_requests_total over the replicas = %v, want %d", requests, n)
		}
		// Every user message and choice joined to its span on the replica of its trace: an
		// event routed to the other replica is counted orphaned there at assembly.timeout.
		events := func(outcome string) (total float64, each []float64) {
			for _, r := range replicas {
				v := r.sum(t, "ragwatch_log_records_total", map[string]string{"outcome": outcome})
				each = append(each, v)
				total += v
			}
			return total, each
		}
		testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, "every GenAI event joined or orphaned", func() error {
			joined, _ := events("joined")
			orphaned, _ := events("orphaned")
			if joined+orphaned < 2*n {
				return fmt.Errorf("joined %v, orphaned %v of %d", joined, orphaned, 2*n)
			}
			return nil
		})
		for _, o := range []string{"joined", "orphaned", "late", "no_span", "unread", "ignored"} {
			want := 0.0
			if o == "joined" {
				want = 2 * n
			}
			if got, each := events(o); got != want {
				t.Errorf("ragwatch_log_records_total{outcome=%q} per replica %v, want %v in all", o, each, want)
			}
		}
		var received float64
		for _, r := range replicas {
			received += r.sum(t, "ragwatch_log_records_received_total", nil)
		}
		if received != 2*n {
			t.Errorf("the replicas received %v log records, want %d: the GenAI events only, each once", received, 2*n)
		}

		// Every trace's score is on exactly one replica.
		var seen [2]map[string]bool
		testutil.CheckFor(t, 60*time.Second, 250*time.Millisecond, "every record scored", func() error {
			for i, r := range replicas {
				seen[i] = r.scoredTraces(t)
			}
			if got := len(seen[0]) + len(seen[1]); got < n {
				return fmt.Errorf("scored %d + %d of %d traces", len(seen[0]), len(seen[1]), n)
			}
			return nil
		})
		var both, missing []string
		for _, id := range ids {
			switch {
			case seen[0][id] && seen[1][id]:
				both = append(both, id)
			case !seen[0][id] && !seen[1][id]:
				missing = append(missing, id)
			}
		}
		sort.Strings(both)
		if len(both) > 0 || len(missing) > 0 || len(seen[0])+len(seen[1]) != n {
			t.Errorf("traces on both replicas %v, on none %v; scored %d + %d, want %d", both, missing, len(seen[0]), len(seen[1]), n)
		}
	})

	t.Run("tee from an existing Collector", func(t *testing.T) {
		r := startReplica(t, ragwatch, "sidecar")
		be := startBackend(t)
		col := testutil.FreeAddr(t)
		startCollector(t, otelcol, "tee.yaml", map[string]string{
			"OTELCOL_OTLP_GRPC": col, "TRACING_BACKEND": be.addr, "RAGWATCH_OTLP": r.otlp, "RAG_SERVICES": "^support-bot$",
		})
		const n, plain = 25, 10
		exports, _ := ragTraces(n, "support-bot", 11)
		// An SDK sampler upstream kept these traces with probability 1/4 and said so in the
		// tracestate, which the Collector passes on: each record stands for 4 requests.
		for _, td := range exports {
			setTraceState(td, "ot=th:c;rv:9b8233f7e3a151")
		}
		// The RAG service's GenAI events reach ragwatch; its plain log lines and every log record
		// of the service that does no RAG stay with the Collector's other pipelines.
		exportLogs(t, col, genAIEvents(exports, "support-bot"))
		exportLogs(t, col, genAIEvents(exports, "checkout"))
		export(t, col, append(exports, plainTraces(plain, "checkout"))...)

		testutil.CheckFor(t, 60*time.Second, 200*time.Millisecond, "the backend got every span and ragwatch every RAG trace", func() error {
			got := r.sum(t, "ragwatch_records_total", map[string]string{"outcome": "assembled"})
			if be.spans("support-bot") < 3*n || be.spans("checkout") < 3*plain || got < n {
				return fmt.Errorf("backend spans support-bot %d checkout %d; ragwatch assembled %v of %d",
					be.spans("support-bot"), be.spans("checkout"), got, n)
			}
			return nil
		})
		if got, want := be.spans("support-bot")+be.spans("checkout"), 3*n+3*plain; got != want {
			t.Errorf("backend received %d spans, want %d", got, want)
		}
		testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, "the GenAI events joined", func() error {
			if got := r.sum(t, "ragwatch_log_records_total", map[string]string{"outcome": "joined"}); got != 2*n {
				return fmt.Errorf("joined %v of %d", got, 2*n)
			}
			return nil
		})
		if got := r.sum(t, "ragwatch_log_records_received_total", nil); got != 2*n {
			t.Errorf("ragwatch received %v log records, want %d: the RAG service's GenAI events only", got, 2*n)
		}
		if got := r.sum(t, "ragwatch_spans_received_total", nil); got != 3*n {
			t.Errorf("ragwatch received %v spans, want %d: the RAG spans once, the checkout spans filtered out", got, 3*n)
		}
		// Signals are recorded just after the record is counted as assembled.
		requests := func() float64 {
			return r.sum(t, "ragwatch_requests_total", map[string]string{"service": "support-bot"})
		}
		testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, "request signals", func() error {
			if got := requests(); got < 4*n {
				return fmt.Errorf("ragwatch_requests_total = %v", got)
			}
			return nil
		})
		if got := requests(); got != 4*n {
			t.Errorf("ragwatch_requests_total = %v, want %d: %d records sampled upstream at 1/4", got, 4*n, n)
		}
		for _, m := range []struct {
			labels map[string]string
			want   float64
		}{
			{map[string]string{"outcome": "assembled"}, n},
			{map[string]string{"outcome": "partial"}, 0},
			{map[string]string{"outcome": "not_rag"}, 0},
		} {
			if got := r.sum(t, "ragwatch_records_total", m.labels); got != m.want {
				t.Errorf("ragwatch_records_total%v = %v, want %v", m.labels, got, m.want)
			}
		}
	})
}
