package service_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// sink captures every record after the other stages, as JSON copies (stages must not keep
// the records they are handed).
type sink struct {
	mu   sync.Mutex
	recs map[string]*record.Record // by Key
}

func (s *sink) ConsumeRecord(_ context.Context, r *record.Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var c record.Record
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		s.recs = map[string]*record.Record{}
	}
	s.recs[c.Key()] = &c
	return nil
}

// get returns the record of key (record.Record.Key), or, given a trace id, the one record of
// that trace (nil when the trace gave several).
func (s *sink) get(key string) *record.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.recs[key]; ok {
		return r
	}
	var only *record.Record
	for _, r := range s.recs {
		if r.TraceID == key {
			if only != nil {
				return nil
			}
			only = r
		}
	}
	return only
}

func (s *sink) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

// statsdServer collects the lines of every UDP packet it receives.
type statsdServer struct {
	conn  net.PacketConn
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func newStatsdServer(t *testing.T) *statsdServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &statsdServer{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		buf := make([]byte, 65536)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			for _, l := range strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n") {
				if l != "" {
					s.lines = append(s.lines, l)
				}
			}
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close(); <-s.done })
	return s
}

// count returns how many received lines equal line.
func (s *statsdServer) count(line string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if l == line {
			n++
		}
	}
	return n
}

func (s *statsdServer) dump() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := append([]string(nil), s.lines...)
	sort.Strings(c)
	return strings.Join(c, "\n")
}

// metricsServer is a real OTLP gRPC metrics endpoint that keeps the last value of every
// cumulative sum and histogram data point, by metric name and attributes.
type metricsServer struct {
	pmetricotlp.UnimplementedGRPCServer
	srv  *grpc.Server
	addr string
	mu   sync.Mutex
	sums map[string]float64 // name{attrs} → value
	hist map[string][2]float64
}

func newMetricsServer(t *testing.T) *metricsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &metricsServer{srv: grpc.NewServer(), addr: ln.Addr().String(), sums: map[string]float64{}, hist: map[string][2]float64{}}
	pmetricotlp.RegisterGRPCServer(m.srv, m)
	done := make(chan struct{})
	go func() { defer close(done); _ = m.srv.Serve(ln) }()
	t.Cleanup(func() { m.srv.Stop(); <-done })
	return m
}

func (m *metricsServer) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rms := req.Metrics().ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				mt := ms.At(k)
				switch mt.Type() {
				case pmetric.MetricTypeSum:
					dps := mt.Sum().DataPoints()
					for d := 0; d < dps.Len(); d++ {
						v := dps.At(d).DoubleValue()
						if dps.At(d).ValueType() == pmetric.NumberDataPointValueTypeInt {
							v = float64(dps.At(d).IntValue())
						}
						m.sums[seriesKey(mt.Name(), dps.At(d).Attributes())] = v
					}
				case pmetric.MetricTypeHistogram:
					dps := mt.Histogram().DataPoints()
					for d := 0; d < dps.Len(); d++ {
						m.hist[seriesKey(mt.Name(), dps.At(d).Attributes())] = [2]float64{float64(dps.At(d).Count()), dps.At(d).Sum()}
					}
				}
			}
		}
	}
	return pmetricotlp.NewExportResponse(), nil
}

func seriesKey(name string, attrs pcommon.Map) string {
	var kv []string
	attrs.Range(func(k string, v pcommon.Value) bool {
		kv = append(kv, k+"="+v.AsString())
		return true
	})
	sort.Strings(kv)
	return name + "{" + strings.Join(kv, ",") + "}"
}

func (m *metricsServer) sum(key string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sums[key]
}

func (m *metricsServer) histogram(key string) [2]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hist[key]
}

// env is a running ragwatch with its observers.
type env struct {
	app     *service.App
	sink    *sink
	statsd  *statsdServer
	metrics *metricsServer
	base    string // http://host:port of ragwatch's HTTP server
}

// testConfig is the defaults on free loopback ports with short assembly waits; the embedded
// NATS server stores in a temporary directory.
func testConfig(t *testing.T) *config.Config {
	cfg := config.Default()
	cfg.NATS.StoreDir = t.TempDir()
	cfg.NATS.Embedded.Endpoint = "127.0.0.1:-1" // -1: a free port (0 would be nats-server's default 4222)
	cfg.Receivers.OTLP.GRPC.Endpoint = "127.0.0.1:0"
	cfg.Receivers.OTLP.HTTP.Endpoint = "127.0.0.1:0"
	cfg.HTTP.Endpoint, cfg.HTTP.APIEndpoint = "127.0.0.1:0", ""
	cfg.Assembly.Wait = 50 * time.Millisecond
	cfg.Assembly.CompleteWait = 20 * time.Millisecond // complete traces take the early release
	cfg.Assembly.Timeout = 10 * time.Second
	return cfg
}

// startEnv runs an App for cfg with the observers of env (record sink, statsd and OTLP metrics
// servers, which it points cfg's exporters at) and opts, and shuts it down when the test ends.
func startEnv(t *testing.T, cfg *config.Config, opts ...service.Option) *env {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return startEnvLogger(t, cfg, logger, opts...)
}

// startEnvLogger is startEnv with the app logging to logger.
func startEnvLogger(t *testing.T, cfg *config.Config, logger *slog.Logger, opts ...service.Option) *env {
	t.Helper()
	e := &env{sink: &sink{}, statsd: newStatsdServer(t), metrics: newMetricsServer(t)}
	cfg.Exporters.Statsd.Endpoint = e.statsd.conn.LocalAddr().String()
	cfg.Exporters.Statsd.FlushInterval = 10 * time.Millisecond
	cfg.Exporters.OTLP.Endpoint = config.SecretURL(e.metrics.addr)
	cfg.Exporters.OTLP.Protocol = "grpc"
	cfg.Exporters.OTLP.Insecure = true
	cfg.Exporters.OTLP.Interval = 50 * time.Millisecond
	a, err := service.New(cfg, logger, append([]service.Option{service.WithRecordSink(e.sink)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.app = a
	e.base = "http://" + a.Addrs().HTTP
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return e
}

// idGen gives each trace a fixed id chosen by the test and numbers spans 1, 2, 3, ...
type idGen struct {
	mu    sync.Mutex
	trace trace.TraceID
	span  uint64
}

// rootSpanID is the id the sender gives a trace's first span (its root).
var rootSpanID = spanID(1).String()

func (g *idGen) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.span++
	return g.trace, spanID(g.span)
}

func (g *idGen) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.span++
	return spanID(g.span)
}

func (g *idGen) reset(tid trace.TraceID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.trace, g.span = tid, 0
}

func spanID(n uint64) trace.SpanID {
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], n)
	return s
}

// sender is an OTel SDK tracer provider exporting each span as it ends, as instrumented apps
// do with a simple span processor.
type sender struct {
	tp  *sdktrace.TracerProvider
	ids *idGen
}

func newSender(t *testing.T, protocol, endpoint, service string) *sender {
	t.Helper()
	ctx := context.Background()
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure(),
			otlptracegrpc.WithCompressor("gzip"), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	case "http":
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure(),
			otlptracehttp.WithCompression(otlptracehttp.GzipCompression), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	}
	if err != nil {
		t.Fatal(err)
	}
	ids := &idGen{}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
		sdktrace.WithIDGenerator(ids),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(exp)),
	)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &sender{tp: tp, ids: ids}
}

// sp describes one span of a test trace; times are offsets from base in milliseconds.
type sp struct {
	name       string
	parent     int // index in the trace + 1; 0 is a root
	start, end float64
	attrs      []attribute.KeyValue
	events     []ev
	kind       trace.SpanKind
}

type ev struct {
	name  string
	at    float64
	attrs []attribute.KeyValue
}

var base = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(ms float64) time.Time { return base.Add(time.Duration(ms * float64(time.Millisecond))) }

// send emits the spans of one trace with the SDK, ending children before their parents as
// real instrumentation does, so the root arrives last.
func (s *sender) send(t *testing.T, tid trace.TraceID, spans []sp) {
	t.Helper()
	s.ids.reset(tid)
	tr := s.tp.Tracer("ragwatch-integration-test")
	ctxs := make([]context.Context, len(spans))
	live := make([]trace.Span, len(spans))
	for i, d := range spans {
		parent := context.Background()
		if d.parent > 0 {
			parent = ctxs[d.parent-1]
		}
		kind := d.kind
		if kind == 0 {
			kind = trace.SpanKindInternal
		}
		ctxs[i], live[i] = tr.Start(parent, d.name, trace.WithTimestamp(at(d.start)), trace.WithAttributes(d.attrs...), trace.WithSpanKind(kind))
		for _, e := range d.events {
			live[i].AddEvent(e.name, trace.WithTimestamp(at(e.at)), trace.WithAttributes(e.attrs...))
		}
	}
	for i := len(spans) - 1; i >= 0; i-- {
		live[i].End(trace.WithTimestamp(at(spans[i].end)))
	}
	if err := s.tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// scrape reads /metrics over HTTP and returns every sample as name{label="v",...} → value,
// labels sorted, histograms as _sum and _count.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := func(suffix string) string { return name + suffix + labelString(m.GetLabel()) }
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key("_sum")] = m.GetHistogram().GetSampleSum()
				out[key("_count")] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func labelString(lps []*dto.LabelPair) string {
	var kv []string
	for _, lp := range lps {
		if lp.GetValue() == "" {
			continue // an empty label is an absent one, as in Prometheus (variant="" of records without variant)
		}
		kv = append(kv, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
	}
	if len(kv) == 0 {
		return ""
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func fp(f float64) *float64 { return &f }

func appNew(cfg *config.Config) (*service.App, error) {
	return service.New(cfg, nil)
}
