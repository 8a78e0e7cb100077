package otlp

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/memlimit"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// gate holds every export in the consumer until released, so requests overlap.
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func (g *gate) ConsumeTraces(context.Context, ptrace.Traces) error {
	g.entered <- struct{}{}
	<-g.release
	return nil
}

// bigTraces is one span whose attribute makes the request about n bytes.
func bigTraces(n int) ptrace.Traces {
	td := traces(1)
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	sp.Attributes().PutStr("input.value", strings.Repeat("x", n))
	return td
}

// Two large exports arrive while the heap sample is low. Before Admit, both passed the heap
// check and both were read and decoded at once; now the second, which does not fit under the
// limit beside the first, is refused with the retryable answer on HTTP and gRPC alike, and a
// small export still gets in beside the first.
func TestLargeRequestsAdmittedOneAtATime(t *testing.T) {
	reg := prometheus.NewRegistry()
	guard := memlimit.NewWithReader(10, func() uint64 { return 1 << 20 }, time.Hour, reg) // 10 MiB, heap 1 MiB
	if err := guard.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = guard.Shutdown(context.Background()) })
	g := &gate{entered: make(chan struct{}, 4), release: make(chan struct{})}
	r, err := New(Settings{
		GRPCEndpoint: "127.0.0.1:0",
		HTTPEndpoint: "127.0.0.1:0",
		Limits:       span.Limits{MaxAttributeValueBytes: 4 << 20},
		Next:         g,
		Metrics:      ingest.NewMetrics(reg),
		Refuse:       guard.Refuse,
		Admit:        guard.Admit,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(r.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	releaseAll := sync.OnceFunc(func() { close(g.release) })
	t.Cleanup(func() {
		releaseAll() // a failed test must not leave handlers waiting in the consumer
		_ = conn.Close()
		_ = r.Shutdown(context.Background())
	})
	url := "http://" + r.HTTPAddr().String() + TracesPath
	hc := &http.Client{Timeout: 5 * time.Second} // without Admit the second export would wait in the consumer
	post := func(body []byte) (*http.Response, error) {
		return hc.Post(url, "application/x-protobuf", bytes.NewReader(body))
	}

	big := protoBody(t, bigTraces(2<<20)) // ≈ 2 MiB: 8 MiB charged of the 9 MiB left
	first := make(chan int, 1)
	go func() {
		resp, err := post(big)
		if err != nil {
			first <- -1
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-g.entered // the first large export is being handled

	resp, err := post(big)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second large HTTP export: %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	client := ptraceotlp.NewGRPCClient(conn)
	_, err = client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(bigTraces(2<<20)))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second large gRPC export: %v, want RESOURCE_EXHAUSTED", err)
	}
	if got := testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"reason": "overloaded"}); got != 2 {
		t.Fatalf("overloaded rejections = %v, want 2", got)
	}

	// A small export fits beside the large one.
	small := make(chan int, 1)
	go func() {
		resp, err := post(protoBody(t, traces(1)))
		if err != nil {
			small <- -1
			return
		}
		resp.Body.Close()
		small <- resp.StatusCode
	}()
	<-g.entered
	releaseAll()
	if got := <-first; got != http.StatusOK {
		t.Fatalf("first large export: %d", got)
	}
	if got := <-small; got != http.StatusOK {
		t.Fatalf("small export beside it: %d", got)
	}
	// Once the first is done, the next large export is admitted.
	resp, err = post(big)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("large export after the first finished: %d", resp.StatusCode)
	}
}
