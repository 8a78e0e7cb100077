package signals

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cactus/go-statsd-client/v5/statsd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// listenUDP opens a real statsd "server" socket on a free port.
func listenUDP(t *testing.T) *net.UDPConn {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// readPackets reads datagrams until n have arrived or the deadline passes.
func readPackets(t *testing.T, conn *net.UDPConn, n int) []string {
	t.Helper()
	var out []string
	buf := make([]byte, 65536)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(out) < n {
		k, _, err := conn.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("after %d packets %q: %v", len(out), out, err)
		}
		out = append(out, string(buf[:k]))
	}
	return out
}

// noMorePackets checks that nothing else arrives for a short while.
func noMorePackets(t *testing.T, conn *net.UDPConn) {
	t.Helper()
	buf := make([]byte, 65536)
	_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if k, _, err := conn.ReadFromUDP(buf); err == nil {
		t.Errorf("unexpected packet %q", buf[:k])
	}
}

func statsdExporters(addr, tagFormat string) config.Exporters {
	return config.Exporters{Statsd: config.Statsd{
		Endpoint: addr, Prefix: "rag", TagFormat: tagFormat,
		// Long interval: the test sees exactly the one packet flushed by Shutdown.
		FlushInterval: time.Hour, FlushBytes: 1432,
	}}
}

func TestStatsdPackets(t *testing.T) {
	negative := recordB()
	negative.Feedback = &record.Feedback{Score: -1}
	tests := []struct {
		format string
		want   []string
	}{
		{"datadog", []string{
			"rag.requests:1|c|#service:support-bot",
			"rag.retrieved_count:3|g|#service:support-bot",
			"rag.avg_relevance:0.5|g|#service:support-bot",
			"rag.answer_length:2|g|#service:support-bot", // words, the seed's meaning
			"rag.answer_tokens:27|g|#service:support-bot",
			"rag.citations:1|g|#service:support-bot",
			"rag.latency.retrieval:35|ms|#service:support-bot",
			"rag.latency.generation:812|ms|#service:support-bot",
			"rag.latency.total:870|ms|#service:support-bot",
			"rag.user_feedback:1|g|#service:support-bot",
			"rag.feedback:1|c|#service:support-bot,sentiment:positive",
			// recordB with negative feedback: empty retrieval, 4 words, total only.
			"rag.requests:1|c|#service:support-bot",
			"rag.retrieved_count:0|g|#service:support-bot",
			"rag.empty_retrievals:1|c|#service:support-bot",
			"rag.answer_length:4|g|#service:support-bot",
			"rag.citations:0|g|#service:support-bot",
			"rag.refusals:1|c|#service:support-bot", // "I do not know"
			"rag.latency.total:120|ms|#service:support-bot",
			"rag.user_feedback:0|g|#service:support-bot",
			"rag.user_feedback:-1|g|#service:support-bot",
			"rag.feedback:1|c|#service:support-bot,sentiment:negative",
		}},
		{"influx", []string{
			"rag.requests,service=support-bot:1|c",
			"rag.retrieved_count,service=support-bot:3|g",
			"rag.avg_relevance,service=support-bot:0.5|g",
			"rag.answer_length,service=support-bot:2|g",
			"rag.answer_tokens,service=support-bot:27|g",
			"rag.citations,service=support-bot:1|g",
			"rag.latency.retrieval,service=support-bot:35|ms",
			"rag.latency.generation,service=support-bot:812|ms",
			"rag.latency.total,service=support-bot:870|ms",
			"rag.user_feedback,service=support-bot:1|g",
			"rag.feedback,service=support-bot,sentiment=positive:1|c",
			"rag.requests,service=support-bot:1|c",
			"rag.retrieved_count,service=support-bot:0|g",
			"rag.empty_retrievals,service=support-bot:1|c",
			"rag.answer_length,service=support-bot:4|g",
			"rag.citations,service=support-bot:0|g",
			"rag.refusals,service=support-bot:1|c",
			"rag.latency.total,service=support-bot:120|ms",
			"rag.user_feedback,service=support-bot:0|g",
			"rag.user_feedback,service=support-bot:-1|g",
			"rag.feedback,service=support-bot,sentiment=negative:1|c",
		}},
		{"none", []string{
			"rag.requests:1|c",
			"rag.retrieved_count:3|g",
			"rag.avg_relevance:0.5|g",
			"rag.answer_length:2|g",
			"rag.answer_tokens:27|g",
			"rag.citations:1|g",
			"rag.latency.retrieval:35|ms",
			"rag.latency.generation:812|ms",
			"rag.latency.total:870|ms",
			"rag.user_feedback:1|g",
			"rag.feedback:1|c",
			"rag.requests:1|c",
			"rag.retrieved_count:0|g",
			"rag.empty_retrievals:1|c",
			"rag.answer_length:4|g",
			"rag.citations:0|g",
			"rag.refusals:1|c",
			"rag.latency.total:120|ms",
			"rag.user_feedback:0|g",
			"rag.user_feedback:-1|g",
			"rag.feedback:1|c",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			conn := listenUDP(t)
			s, reg := newTestSignals(t, 10, statsdExporters(conn.LocalAddr().String(), tt.format))
			ctx := context.Background()
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			consume(t, s, recordA(), negative)
			if err := s.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			got := readPackets(t, conn, 1)
			if want := strings.Join(tt.want, "\n"); got[0] != want {
				t.Errorf("packet\n%s\nwant\n%s", got[0], want)
			}
			noMorePackets(t, conn)
			// After Shutdown records reach Prometheus only; nothing is sent or counted as an error.
			consume(t, s, recordA())
			noMorePackets(t, conn)
			if v := testutil.ToFloat64(s.statsdErrs); v != 0 {
				t.Errorf("ragwatch_statsd_errors_total = %v, want 0", v)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ragwatch_requests_total RAG requests seen, by service: each record counts 1/p when only a sample with probability p reaches ragwatch (tracestate ot=th, receivers.otlp.upstream_sampling_probability).
# TYPE ragwatch_requests_total counter
ragwatch_requests_total{service="support-bot",variant=""} 3
`), "ragwatch_requests_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

// A record kept upstream with probability p sends its request counters with statsd's sample
// rate @p (before the tags), which the server scales back to 1/p requests.
func TestStatsdSampleRateOfUpstreamSampling(t *testing.T) {
	conn := listenUDP(t)
	s, _ := newTestSignals(t, 10, statsdExporters(conn.LocalAddr().String(), "datadog"))
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r := recordB()
	r.UpstreamProbability = 0.25
	consume(t, s, r)
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := readPackets(t, conn, 1)[0]
	for _, want := range []string{"rag.requests:1|c|@0.25|#service:support-bot\n", "rag.empty_retrievals:1|c|@0.25|#service:support-bot\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("packet\n%s\nlacks %q", got, want)
		}
	}
}

// TestStatsdFeedbackOnly: feedback joined later sends only the feedback lines.
func TestStatsdFeedbackOnly(t *testing.T) {
	conn := listenUDP(t)
	s, _ := newTestSignals(t, 10, statsdExporters(conn.LocalAddr().String(), "datadog"))
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsumeFeedback(ctx, record.Feedback{TraceID: traceA, Service: "support-bot", Score: 0.5}); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	want := "rag.user_feedback:0.5|g|#service:support-bot\nrag.feedback:1|c|#service:support-bot,sentiment:positive"
	if got := readPackets(t, conn, 1); got[0] != want {
		t.Errorf("packet\n%s\nwant\n%s", got[0], want)
	}
}

// TestStatsdFlushBytes: the buffer is sent as soon as the next line would pass flush_bytes,
// without waiting for the interval.
func TestStatsdFlushBytes(t *testing.T) {
	conn := listenUDP(t)
	exp := statsdExporters(conn.LocalAddr().String(), "none")
	exp.Statsd.FlushBytes = 40
	s, _ := newTestSignals(t, 10, exp)
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	if err := s.ConsumeFeedback(ctx, record.Feedback{TraceID: traceA, Score: 1}); err != nil {
		t.Fatal(err)
	}
	// The first feedback buffers "rag.user_feedback:1|g\nrag.feedback:1|c\n" (39 bytes < 40); the
	// second one's first line would pass 40, so the buffer goes out as one packet right away.
	if err := s.ConsumeFeedback(ctx, record.Feedback{TraceID: traceA, Score: 1}); err != nil {
		t.Fatal(err)
	}
	got := readPackets(t, conn, 1)
	if want := "rag.user_feedback:1|g\nrag.feedback:1|c"; got[0] != want {
		t.Errorf("first packet %q, want %q", got[0], want)
	}
}

// failingSender is a statsd transport whose every send fails, as a UDP socket does when the
// kernel reports the port unreachable.
type failingSender struct {
	mu    sync.Mutex
	sends int
}

func (f *failingSender) Send(data []byte) (int, error) {
	f.mu.Lock()
	f.sends++
	f.mu.Unlock()
	return 0, errors.New("connection refused")
}

func (f *failingSender) Close() error { return nil }

func TestStatsdErrorsCounted(t *testing.T) {
	errs := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
	fs := &failingSender{}
	r, err := newStatsdRecorder(config.Statsd{Endpoint: "127.0.0.1:1", Prefix: "rag", TagFormat: "datadog",
		FlushInterval: time.Hour, FlushBytes: 1432}, errs, func(string) (statsd.Sender, error) { return fs, nil })
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newTestSignals(t, 10, config.Exporters{})
	o := s.observe(recordA())
	o.Request = true
	computeRecord(&o, recordA())
	r.Record(context.Background(), o) // buffered: no error yet
	if v := testutil.ToFloat64(errs); v != 0 {
		t.Fatalf("errors before flush = %v, want 0", v)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// One packet failed at the flush.
	if v := testutil.ToFloat64(errs); v != 1 || fs.sends != 1 {
		t.Fatalf("errors, sends after flush = %v, %d; want 1, 1", v, fs.sends)
	}
	// After close a record's lines cannot be queued (the buffered sender is not running): one
	// error per record.
	r.Record(context.Background(), o)
	r.Record(context.Background(), o)
	if v := testutil.ToFloat64(errs); v != 3 {
		t.Fatalf("errors after close = %v, want 3", v)
	}
}

// TestConcurrentConsumeAndShutdown: records keep flowing while the push exporters shut down;
// nothing races or panics and every record is counted by Prometheus. (A statsd line that loses
// the race with the client's close is counted in ragwatch_statsd_errors_total; how many do is
// up to the scheduler, so TestStatsdErrorsCounted checks that path.)
func TestConcurrentConsumeAndShutdown(t *testing.T) {
	conn := listenUDP(t)
	grpcAddr, _ := startGRPCMetricsServer(t, nil)
	exp := otlpExporters(grpcAddr, "grpc")
	exp.Statsd = statsdExporters(conn.LocalAddr().String(), "datadog").Statsd
	s, reg := newTestSignals(t, 10, exp)
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const workers, perWorker = 4, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWorker {
				if err := s.ConsumeRecord(ctx, recordA()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	wg.Wait()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ragwatch_requests_total RAG requests seen, by service: each record counts 1/p when only a sample with probability p reaches ragwatch (tracestate ot=th, receivers.otlp.upstream_sampling_probability).
# TYPE ragwatch_requests_total counter
ragwatch_requests_total{service="support-bot",variant=""} 800
`), "ragwatch_requests_total"); err != nil {
		t.Error(err)
	}
}

// TestStatsdHostName: an endpoint given by host name (resolved again every ResolveInterval)
// reaches the server too.
func TestStatsdHostName(t *testing.T) {
	conn := listenUDP(t)
	_, port, _ := net.SplitHostPort(conn.LocalAddr().String())
	s, _ := newTestSignals(t, 10, statsdExporters(net.JoinHostPort("localhost", port), "datadog"))
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsumeFeedback(ctx, record.Feedback{TraceID: traceA, Service: "a", Score: 0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	want := "rag.user_feedback:0|g|#service:a\nrag.feedback:1|c|#service:a,sentiment:neutral"
	if got := readPackets(t, conn, 1); got[0] != want {
		t.Errorf("packet %q, want %q", got[0], want)
	}
}

// TestZeroDurationsUseDefaults: a config built by hand without intervals or timeouts works (the
// statsd ticker would panic on 0).
func TestZeroDurationsUseDefaults(t *testing.T) {
	conn := listenUDP(t)
	addr, _ := startGRPCMetricsServer(t, nil)
	s, _ := newTestSignals(t, 10, config.Exporters{
		Statsd: config.Statsd{Endpoint: conn.LocalAddr().String(), TagFormat: "none"},
		OTLP:   config.OTLPMetrics{Endpoint: config.SecretURL(addr), Protocol: "grpc", Insecure: true},
	})
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsumeFeedback(ctx, record.Feedback{TraceID: traceA, Score: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// The 100ms default tick may split the two lines into two packets.
	got := readPackets(t, conn, 1)[0]
	if got == "user_feedback:1|g" {
		got += "\n" + readPackets(t, conn, 1)[0]
	}
	if want := "user_feedback:1|g\nfeedback:1|c"; got != want {
		t.Errorf("lines %q, want %q", got, want)
	}
}

// TestStatsdTagSanitized: a service name holding statsd or tag separators cannot break the
// line or inject another one; the value is the same in every format.
func TestStatsdTagSanitized(t *testing.T) {
	for _, tt := range []struct{ format, want string }{
		{"datadog", "rag.user_feedback:1|g|#service:a_b_c_d__e_f_g\nrag.feedback:1|c|#service:a_b_c_d__e_f_g,sentiment:positive"},
		{"influx", "rag.user_feedback,service=a_b_c_d__e_f_g:1|g\nrag.feedback,service=a_b_c_d__e_f_g,sentiment=positive:1|c"},
		{"graphite", "rag.user_feedback;service=a_b_c_d__e_f_g:1|g\nrag.feedback;service=a_b_c_d__e_f_g;sentiment=positive:1|c"},
	} {
		t.Run(tt.format, func(t *testing.T) {
			conn := listenUDP(t)
			s, _ := newTestSignals(t, 10, statsdExporters(conn.LocalAddr().String(), tt.format))
			ctx := context.Background()
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.ConsumeFeedback(ctx, record.Feedback{TraceID: traceA, Service: "a|b:c,d\n#e=f;g", Score: 1}); err != nil {
				t.Fatal(err)
			}
			if err := s.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if got := readPackets(t, conn, 1)[0]; got != tt.want {
				t.Errorf("packet\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestStatsdLongChunkSplit: a record whose lines do not fit one packet is queued line by line,
// so packets stay within flush_bytes.
func TestStatsdLongChunkSplit(t *testing.T) {
	conn := listenUDP(t)
	exp := statsdExporters(conn.LocalAddr().String(), "none")
	exp.Statsd.FlushBytes = 60
	s, _ := newTestSignals(t, 10, exp)
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	consume(t, s, recordB()) // 7 lines, 156 bytes
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"rag.requests:1|c\nrag.retrieved_count:0|g",
		"rag.empty_retrievals:1|c\nrag.answer_length:4|g",
		"rag.citations:0|g\nrag.refusals:1|c",
		"rag.latency.total:120|ms",
	}
	got := readPackets(t, conn, len(want))
	if !slices.Equal(got, want) {
		t.Errorf("packets\n%q\nwant\n%q", got, want)
	}
	for _, p := range got {
		if len(p) >= 60 {
			t.Errorf("packet of %d bytes, flush_bytes is 60", len(p))
		}
	}
}
