package otlp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/featuregate"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/synth"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
)

// The loadgen's request shape (ragwatch loadgen --spans 5 --documents 5 --doc-bytes 1024
// --batch 50 --concurrency 4): 50 five-span RAG traces per request, 4 requests in flight.
const (
	benchBatch    = 50
	benchInFlight = 4
	benchBodies   = 16 // distinct requests, so trace ids and contents vary
)

// benchRequests builds benchBodies encoded requests of benchBatch traces each, and one of
// tail traces (b.N rarely divides by benchBatch: the tail makes the traces sent exactly b.N).
func benchRequests(tb testing.TB, tail int) (full [][]byte, last []byte) {
	gen := synth.New(synth.Options{Seed: 8, Spans: 5, Documents: 5, DocBytes: 1024})
	now := time.Unix(1_780_000_000, 0)
	build := func(n int) []byte {
		td := ptrace.NewTraces()
		for range n {
			turn := gen.Next(now)
			synth.AppendTraces(td, &turn)
		}
		if n > 0 && td.SpanCount() != 5*n {
			tb.Fatalf("built %d spans for %d traces", td.SpanCount(), n)
		}
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	for range benchBodies {
		full = append(full, build(benchBatch))
	}
	return full, build(tail)
}

// benchReceiver starts a receiver whose consumer only counts spans (and then calls after,
// when set) with the extra gRPC server options.
func benchReceiver(b *testing.B, grpcEP, httpEP string, after func(ptrace.Traces), opts ...grpc.ServerOption) (*Receiver, *atomic.Int64) {
	b.Helper()
	var spans atomic.Int64
	r, err := New(Settings{
		GRPCEndpoint: grpcEP,
		HTTPEndpoint: httpEP,
		Next: TracesConsumerFunc(func(_ context.Context, td ptrace.Traces) error {
			spans.Add(int64(td.SpanCount()))
			if after != nil {
				after(td)
			}
			return nil
		}),
		Metrics: ingest.NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		b.Fatal(err)
	}
	r.extraGRPCOpts = opts
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := r.Shutdown(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return r, &spans
}

// runBench sends b.N traces as requests of benchBatch with benchInFlight senders and reports
// the process's CPU time per trace (server and client together: both run in this process).
func runBench(b *testing.B, spans *atomic.Int64, send func(body []byte) error) {
	full, last := benchRequests(b, b.N%benchBatch)
	requests := b.N / benchBatch
	// Warm up connections and pools outside the measurement.
	for i := range benchInFlight {
		if err := send(full[i]); err != nil {
			b.Fatal(err)
		}
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	b.ReportAllocs()
	b.ResetTimer()
	stop := benchcpu.Report(b)
	for range benchInFlight {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i > requests {
					return
				}
				body := last
				if i < requests {
					body = full[i%len(full)]
				} else if len(last) == 0 {
					return
				}
				if err := send(body); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	stop()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	if got := spans.Load(); got != int64(5*(b.N+benchInFlight*benchBatch)) {
		b.Fatalf("consumer saw %d spans, want %d", got, 5*(b.N+benchInFlight*benchBatch))
	}
}

// BenchmarkGRPCExport5Span is the OTLP gRPC receiver on a loopback listener fed like the
// loadgen feeds it; one op is one five-span trace. The client sends pre-encoded requests
// through the receiver's pass-through codec, so the client's cost is gRPC transport only.
func BenchmarkGRPCExport5Span(b *testing.B) {
	benchGRPC(b, nil)
}

func benchGRPC(b *testing.B, after func(ptrace.Traces), opts ...grpc.ServerOption) {
	r, spans := benchReceiver(b, "127.0.0.1:0", "", after, opts...)
	conn, err := grpc.NewClient(r.GRPCAddr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	runBench(b, spans, func(body []byte) error {
		var out []byte
		return conn.Invoke(ctx, exportMethod, body, &out)
	})
}

// BenchmarkGRPCExportOneTrace is one RPC at a time carrying one five-span trace: what the
// receiver and gRPC spend per RPC (client included) on top of the decode.
func BenchmarkGRPCExportOneTrace(b *testing.B) {
	r, spans := benchReceiver(b, "127.0.0.1:0", "", nil)
	conn, err := grpc.NewClient(r.GRPCAddr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	_, body := benchRequests(b, 1)
	ctx := context.Background()
	var out []byte
	if err := conn.Invoke(ctx, exportMethod, body, &out); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	stop := benchcpu.Report(b)
	for range b.N {
		if err := conn.Invoke(ctx, exportMethod, body, &out); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	stop()
	if got := spans.Load(); got != int64(5*(b.N+1)) {
		b.Fatalf("consumer saw %d spans, want %d", got, 5*(b.N+1))
	}
}

// BenchmarkGRPCServerOptions compares gRPC server options that could cut per-RPC costs, each
// against the receiver's own settings in the same run (-count repeats each case before the
// next). None of the buffer and window sizes helped measurably at 50 traces per request, so
// the receiver sets none of them; NumStreamWorkers=0 takes back the receiver's stream
// workers, whose gain (3–5 %) shows side by side (scripts/paired.sh) and not in this
// benchmark's spread.
func BenchmarkGRPCServerOptions(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []grpc.ServerOption
	}{
		{"receiver", nil},
		{"NumStreamWorkers=0", []grpc.ServerOption{grpc.NumStreamWorkers(0)}}, // a goroutine per export, gRPC's default
		{"ReadBufferSize=256KiB", []grpc.ServerOption{grpc.ReadBufferSize(256 << 10)}},
		{"InitialWindowSize=1MiB", []grpc.ServerOption{grpc.InitialWindowSize(1 << 20), grpc.InitialConnWindowSize(4 << 20)}},
	} {
		b.Run(c.name, func(b *testing.B) { benchGRPC(b, nil, c.opts...) })
	}
}

// BenchmarkGRPCPdataPooling measures pdata's alpha feature gate pdata.useProtoPooling, which
// makes the decoder take its objects from pools that only pdata's internal Delete functions
// refill; the one public way to reach them is removing what was decoded
// (ResourceSpansSlice.RemoveIf), done here after the consumer returned. The gate is global
// to the process, so it is set for the sub-benchmark only; the receiver does not set it.
func BenchmarkGRPCPdataPooling(b *testing.B) {
	release := func(td ptrace.Traces) {
		td.ResourceSpans().RemoveIf(func(ptrace.ResourceSpans) bool { return true })
	}
	for _, c := range []struct {
		name    string
		gate    bool
		release func(ptrace.Traces)
	}{
		{"gate=off", false, nil},
		{"gate=on", true, nil},
		{"gate=off,release", false, release},
		{"gate=on,release", true, release},
	} {
		b.Run(c.name, func(b *testing.B) {
			if err := featuregate.GlobalRegistry().Set(pdataPoolingGate, c.gate); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = featuregate.GlobalRegistry().Set(pdataPoolingGate, false) }()
			benchGRPC(b, c.release)
		})
	}
}

const pdataPoolingGate = "pdata.useProtoPooling"

// BenchmarkHTTPExport5Span is BenchmarkGRPCExport5Span through OTLP/HTTP protobuf.
func BenchmarkHTTPExport5Span(b *testing.B) {
	r, spans := benchReceiver(b, "", "127.0.0.1:0", nil)
	url := "http://" + r.HTTPAddr().String() + TracesPath
	tr := &http.Transport{MaxIdleConnsPerHost: benchInFlight}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	runBench(b, spans, func(body []byte) error {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", ctProtobuf)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	})
}

// BenchmarkLimitsCheck is the validation of one decoded request of 50 five-span traces with
// the default limits; one op is one request.
func BenchmarkLimitsCheck(b *testing.B) {
	full, _ := benchRequests(b, 0)
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(full[0]); err != nil {
		b.Fatal(err)
	}
	td := req.Traces()
	l := span.Limits{}.WithDefaults()
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.Report(b)()
	for b.Loop() {
		if n, rej := l.Check(td); rej != nil || n != 5*benchBatch {
			b.Fatal(n, rej)
		}
	}
}
