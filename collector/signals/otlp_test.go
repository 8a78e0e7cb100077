package signals

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// metricsSink keeps every export it receives.
type metricsSink struct {
	mu  sync.Mutex
	got []pmetric.Metrics
}

func (s *metricsSink) add(md pmetric.Metrics) {
	c := pmetric.NewMetrics()
	md.CopyTo(c)
	s.mu.Lock()
	s.got = append(s.got, c)
	s.mu.Unlock()
}

func (s *metricsSink) all() []pmetric.Metrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// grpcMetricsServer is a real OTLP metrics gRPC endpoint.
type grpcMetricsServer struct {
	pmetricotlp.UnimplementedGRPCServer
	sink *metricsSink
	fail error
}

func (g *grpcMetricsServer) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	if g.fail != nil {
		return pmetricotlp.NewExportResponse(), g.fail
	}
	g.sink.add(req.Metrics())
	return pmetricotlp.NewExportResponse(), nil
}

func startGRPCMetricsServer(t *testing.T, fail error) (addr string, sink *metricsSink) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink = &metricsSink{}
	srv := grpc.NewServer()
	pmetricotlp.RegisterGRPCServer(srv, &grpcMetricsServer{sink: sink, fail: fail})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return ln.Addr().String(), sink
}

// startHTTPMetricsServer is a real OTLP/HTTP metrics endpoint decoding protobuf.
func startHTTPMetricsServer(t *testing.T, failStatus int) (*httptest.Server, *metricsSink) {
	t.Helper()
	sink := &metricsSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/metrics" || r.Method != http.MethodPost {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if failStatus != 0 {
			http.Error(w, "rejected", failStatus)
			return
		}
		sink.add(req.Metrics())
		resp, _ := pmetricotlp.NewExportResponse().MarshalProto()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	return srv, sink
}

func otlpExporters(endpoint, protocol string) config.Exporters {
	return config.Exporters{OTLP: config.OTLPMetrics{
		Endpoint: config.SecretURL(endpoint), Protocol: protocol, Insecure: true,
		// Long interval: the only export is the one Shutdown makes.
		Interval: time.Hour, Timeout: 5 * time.Second,
	}}
}

// summarize renders every data point as one line: name{attrs} unit kind values [exemplars].
func summarize(t *testing.T, mds []pmetric.Metrics) []string {
	t.Helper()
	var out []string
	for _, md := range mds {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			if v, _ := rm.Resource().Attributes().Get("service.name"); v.Str() != "ragwatch" {
				t.Errorf("resource service.name = %q, want ragwatch", v.Str())
			}
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				ms := rm.ScopeMetrics().At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					out = append(out, summarizeMetric(ms.At(k))...)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func attrString(m pcommon.Map) string {
	var kv []string
	m.Range(func(k string, v pcommon.Value) bool {
		kv = append(kv, k+"="+v.AsString())
		return true
	})
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

func exemplarString(es pmetric.ExemplarSlice) string {
	var out []string
	for i := 0; i < es.Len(); i++ {
		e := es.At(i)
		s := e.TraceID().String()
		if !e.SpanID().IsEmpty() {
			s += "/" + e.SpanID().String()
		}
		out = append(out, s)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return ""
	}
	return " exemplars=" + strings.Join(out, ",")
}

func summarizeMetric(m pmetric.Metric) []string {
	var out []string
	head := func(attrs pcommon.Map) string {
		return m.Name() + attrString(attrs) + " unit=" + m.Unit()
	}
	switch m.Type() {
	case pmetric.MetricTypeSum:
		s := m.Sum()
		for i := 0; i < s.DataPoints().Len(); i++ {
			dp := s.DataPoints().At(i)
			out = append(out, fmt.Sprintf("%s sum monotonic=%v %s value=%d%s", head(dp.Attributes()),
				s.IsMonotonic(), s.AggregationTemporality(), dp.IntValue(), exemplarString(dp.Exemplars())))
		}
	case pmetric.MetricTypeHistogram:
		h := m.Histogram()
		for i := 0; i < h.DataPoints().Len(); i++ {
			dp := h.DataPoints().At(i)
			bounds := dp.ExplicitBounds().AsRaw()
			var buckets []string
			for b, n := range dp.BucketCounts().AsRaw() {
				if n == 0 {
					continue
				}
				le := "+Inf"
				if b < len(bounds) {
					le = fmt.Sprint(bounds[b])
				}
				buckets = append(buckets, fmt.Sprintf("%s:%d", le, n))
			}
			out = append(out, fmt.Sprintf("%s histogram %s count=%d sum=%.6g buckets=[%s]%s", head(dp.Attributes()),
				h.AggregationTemporality(), dp.Count(), dp.Sum(), strings.Join(buckets, " "), exemplarString(dp.Exemplars())))
		}
	default:
		out = append(out, m.Name()+" unexpected type "+m.Type().String())
	}
	return out
}

// wantOTLP is what records A and B (service support-bot) give. Buckets list the non-cumulative
// count per upper bound, as OTLP carries them; exemplars are sorted by trace id.
var wantOTLP = []string{
	"ragwatch.answer.tokens{service=support-bot} unit={token} histogram Cumulative count=2 sum=31 buckets=[10:1 50:1]",
	"ragwatch.citations_per_answer{service=support-bot} unit={citation} histogram Cumulative count=2 sum=1 buckets=[0:1 1:1]",
	"ragwatch.empty_retrievals{service=support-bot} unit={request} sum monotonic=true Cumulative value=1",
	"ragwatch.feedback{sentiment=positive,service=support-bot} unit={feedback} sum monotonic=true Cumulative value=1 exemplars=" + traceA + "/" + spanA,
	"ragwatch.refusals{service=support-bot} unit={request} sum monotonic=true Cumulative value=1", // record B: "I do not know"
	"ragwatch.request.duration{service=support-bot,stage=generation} unit=s histogram Cumulative count=1 sum=0.812 buckets=[1:1] exemplars=" + traceA + "/" + spanA,
	"ragwatch.request.duration{service=support-bot,stage=retrieval} unit=s histogram Cumulative count=1 sum=0.035 buckets=[0.05:1] exemplars=" + traceA + "/" + spanA,
	"ragwatch.request.duration{service=support-bot,stage=total} unit=s histogram Cumulative count=2 sum=0.99 buckets=[0.25:1 1:1] exemplars=" + traceB + "," + traceA + "/" + spanA,
	"ragwatch.requests{service=support-bot} unit={request} sum monotonic=true Cumulative value=2",
	"ragwatch.retrieval.score{service=support-bot} unit= histogram Cumulative count=1 sum=0.5 buckets=[0.5:1] exemplars=" + traceA + "/" + spanA,
	"ragwatch.retrieval.top_score{service=support-bot} unit= histogram Cumulative count=1 sum=0.75 buckets=[0.75:1] exemplars=" + traceA + "/" + spanA,
	"ragwatch.retrieved_documents{service=support-bot} unit={document} histogram Cumulative count=2 sum=3 buckets=[0:1 3:1]",
}

func TestOTLPMetricsPush(t *testing.T) {
	grpcAddr, grpcSink := startGRPCMetricsServer(t, nil)
	httpSrv, httpSink := startHTTPMetricsServer(t, 0)
	hostPort := strings.TrimPrefix(httpSrv.URL, "http://")
	tests := []struct {
		name     string
		endpoint string
		protocol string
		sink     *metricsSink
	}{
		{"grpc host:port", grpcAddr, "grpc", grpcSink},
		{"http host:port", hostPort, "http", httpSink},
		{"http base URL", httpSrv.URL, "http", httpSink},
		{"http full URL", httpSrv.URL + "/v1/metrics", "http", httpSink},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(tt.sink.all())
			s, reg := newTestSignals(t, 10, otlpExporters(tt.endpoint, tt.protocol))
			ctx := context.Background()
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			consume(t, s, recordA(), recordB())
			if err := s.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			got := summarize(t, tt.sink.all()[before:])
			if !slices.Equal(got, wantOTLP) {
				t.Errorf("data points\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantOTLP, "\n"))
			}
			if err := promtestutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ragwatch_otlp_metrics_export_errors_total OTLP metrics exports that failed (after the exporter's own retries).
# TYPE ragwatch_otlp_metrics_export_errors_total counter
ragwatch_otlp_metrics_export_errors_total 0
`), "ragwatch_otlp_metrics_export_errors_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestOTLPMetricsPeriodic: without Shutdown, the periodic reader pushes on its interval. An
// export may come before the records are consumed (every 20 ms, on a slow machine), so the
// test waits for one that carries both.
func TestOTLPMetricsPeriodic(t *testing.T) {
	addr, sink := startGRPCMetricsServer(t, nil)
	exp := otlpExporters(addr, "grpc")
	exp.OTLP.Interval = 20 * time.Millisecond
	s, _ := newTestSignals(t, 10, exp)
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	consume(t, s, recordA(), recordB())
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		all := sink.all()
		var last []string
		for _, md := range all {
			if last = summarize(t, []pmetric.Metrics{md}); slices.Equal(last, wantOTLP) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no periodic export of both records within 5s (%d exports); the last\n%s\nwant\n%s",
				len(all), strings.Join(last, "\n"), strings.Join(wantOTLP, "\n"))
		}
	}
}

func TestOTLPMetricsExportErrors(t *testing.T) {
	grpcAddr, _ := startGRPCMetricsServer(t, status.Error(codes.InvalidArgument, "bad data"))
	httpSrv, _ := startHTTPMetricsServer(t, http.StatusBadRequest)
	for _, tt := range []struct{ name, endpoint, protocol string }{
		{"grpc", grpcAddr, "grpc"},
		{"http", httpSrv.URL, "http"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestSignals(t, 10, otlpExporters(tt.endpoint, tt.protocol))
			ctx := context.Background()
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			consume(t, s, recordA())
			if err := s.Shutdown(ctx); err == nil {
				t.Fatal("Shutdown: want the final export's error")
			}
			if v := promtestutil.ToFloat64(s.otlpErrs); v != 1 {
				t.Errorf("ragwatch_otlp_metrics_export_errors_total = %v, want 1", v)
			}
			if err := s.Shutdown(ctx); err != nil {
				t.Errorf("second Shutdown: %v", err)
			}
		})
	}
}

// TestAllExporters: one record reaches all three backends, and the service cap applies alike.
func TestAllExporters(t *testing.T) {
	conn := listenUDP(t)
	grpcAddr, sink := startGRPCMetricsServer(t, nil)
	exp := otlpExporters(grpcAddr, "grpc")
	exp.Statsd = statsdExporters(conn.LocalAddr().String(), "datadog").Statsd
	s, reg := newTestSignals(t, 1, exp)
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a := recordA()
	b := recordB()
	b.Service = "search" // over the cap of 1
	b.Latency = recordB().Latency
	consume(t, s, a, b)
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Prometheus
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ragwatch_requests_total RAG requests seen, by service: each record counts 1/p when only a sample with probability p reaches ragwatch (tracestate ot=th, receivers.otlp.upstream_sampling_probability).
# TYPE ragwatch_requests_total counter
ragwatch_requests_total{service="other",variant=""} 1
ragwatch_requests_total{service="support-bot",variant=""} 1
`), "ragwatch_requests_total"); err != nil {
		t.Error(err)
	}
	// statsd
	pkt := readPackets(t, conn, 1)[0]
	for _, line := range []string{"rag.requests:1|c|#service:support-bot", "rag.requests:1|c|#service:other", "rag.latency.total:120|ms|#service:other"} {
		if !slices.Contains(strings.Split(pkt, "\n"), line) {
			t.Errorf("statsd packet lacks %q:\n%s", line, pkt)
		}
	}
	// OTLP
	got := summarize(t, sink.all())
	for _, line := range []string{
		"ragwatch.requests{service=other} unit={request} sum monotonic=true Cumulative value=1",
		"ragwatch.request.duration{service=other,stage=total} unit=s histogram Cumulative count=1 sum=0.12 buckets=[0.25:1] exemplars=" + traceB,
		"ragwatch.requests{service=support-bot} unit={request} sum monotonic=true Cumulative value=1",
	} {
		if !slices.Contains(got, line) {
			t.Errorf("OTLP lacks %q:\n%s", line, strings.Join(got, "\n"))
		}
	}
}

// TestOTLPExemplarGate: OTLP exemplars go through the same per-bucket gate as Prometheus: a
// second record in the same bucket within ExemplarInterval offers none. (After the interval the
// SDK's reservoir samples among the offers at random, so that case is not asserted here; the
// gate itself is tested by TestExemplarGate.)
func TestOTLPExemplarGate(t *testing.T) {
	t1, t2 := strings.Repeat("1", 32), strings.Repeat("2", 32)
	addr, sink := startGRPCMetricsServer(t, nil)
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s, err := New(Settings{Signals: config.Signals{MaxServices: 10}, Exporters: otlpExporters(addr, "grpc"),
		Registerer: prometheus.NewRegistry(), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rec := func(trace string, ms float64) *record.Record {
		return &record.Record{TraceID: trace, Service: "svc", Answer: "a", Latency: record.Latency{Total: ms}}
	}
	consume(t, s, rec(t1, 800))
	clock = clock.Add(ExemplarInterval - time.Nanosecond)
	consume(t, s, rec(t2, 900), rec(t2, 900), rec(t2, 900))
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	want := "ragwatch.request.duration{service=svc,stage=total} unit=s histogram Cumulative count=4 sum=3.5 buckets=[1:4] exemplars=" + t1
	if got := summarize(t, sink.all()); !slices.Contains(got, want) {
		t.Errorf("no %q in\n%s", want, strings.Join(got, "\n"))
	}
}
