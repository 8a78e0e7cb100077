package otlp

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestSuccessResponseBytes pins the exact bytes of a fully accepted export's response, now
// encoded once and shared, and a partial success through gRPC.
func TestSuccessResponseBytes(t *testing.T) {
	h := start(t, span.Limits{})
	for _, c := range []struct{ contentType, want string }{
		{ctProtobuf, "\n\x00"},
		{ctJSON, `{"partialSuccess":{}}`},
	} {
		body := protoBody(t, traces(1))
		if c.contentType == ctJSON {
			body = jsonBody(t, traces(1))
		}
		resp, out := post(t, h.url, c.contentType, "", body)
		if resp.StatusCode != 200 || string(out) != c.want || resp.Header.Get("Content-Type") != c.contentType {
			t.Errorf("%s: status %d %q body %q, want %q", c.contentType, resp.StatusCode, resp.Header.Get("Content-Type"), out, c.want)
		}
	}
	var out []byte
	if err := h.conn.Invoke(context.Background(), exportMethod, protoBody(t, traces(1)), &out, grpc.ForceCodecV2(rawCodec{})); err != nil {
		t.Fatal(err)
	}
	if string(out) != "\n\x00" {
		t.Errorf("gRPC response %q", out)
	}

	h.sink.setErr(&ingest.PartialError{Rejected: 2, Reason: "trace evicted"})
	resp, err := ptraceotlp.NewGRPCClient(h.conn).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(traces(3)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.PartialSuccess().RejectedSpans() != 2 || resp.PartialSuccess().ErrorMessage() != "trace evicted" {
		t.Errorf("partial success = %d %q", resp.PartialSuccess().RejectedSpans(), resp.PartialSuccess().ErrorMessage())
	}
	if got := h.received(ingest.ReceiverOTLPGRPC); got != 2 {
		t.Errorf("gRPC spans received = %v, want 1 + 1", got)
	}
}

// TestPooledBuffersKeepRequestsApart sends requests of very different sizes, plain and gzip,
// over gRPC and HTTP at once, with failing gzip bodies in between, and checks that every span
// arrives exactly as sent: request buffers and gzip readers are reused across requests.
func TestPooledBuffersKeepRequestsApart(t *testing.T) {
	h := start(t, span.Limits{MaxRequestBytes: 256 << 10})
	// request builds request n of the sender w: n%4+1 spans, each with an attribute whose
	// size swings between 10 bytes and 40 KB, so that a buffer last used for a big request
	// serves a small one next.
	request := func(w, n int) (ptrace.Traces, []string) {
		td := ptrace.NewTraces()
		spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		var names []string
		for i := range n%4 + 1 {
			sp := spans.AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{1, byte(w), byte(n), byte(i)})
			sp.SetSpanID(pcommon.SpanID{1, byte(i)})
			name := fmt.Sprintf("w%d-r%d-s%d", w, n, i)
			sp.SetName(name)
			size := 10
			if (n+i)%2 == 0 {
				size = 40 << 10
			}
			sp.Attributes().PutStr("input.value", strings.Repeat(name[:1], size)+name)
			names = append(names, name+"/"+fmt.Sprint(size))
		}
		return td, names
	}
	const workers, perWorker = 4, 24
	var (
		mu   sync.Mutex
		sent []string
		wg   sync.WaitGroup
	)
	client := ptraceotlp.NewGRPCClient(h.conn)
	for w := range workers {
		wg.Go(func() {
			for n := range perWorker {
				td, names := request(w, n)
				var err error
				switch (w + n) % 4 {
				case 0:
					_, err = client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td))
				case 1:
					_, err = client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td), grpc.UseCompressor(grpcgzip.Name))
				case 2:
					if resp, body := post(t, h.url, ctProtobuf, "", protoBody(t, td)); resp.StatusCode != 200 {
						err = fmt.Errorf("HTTP %d %q", resp.StatusCode, body)
					}
				case 3:
					// A body that is not gzip first: the pooled reader that failed is reused.
					if resp, _ := post(t, h.url, ctProtobuf, "gzip", []byte("not gzip at all")); resp.StatusCode != http.StatusBadRequest {
						err = fmt.Errorf("not gzip: HTTP %d", resp.StatusCode)
						break
					}
					if resp, body := post(t, h.url, ctJSON, "gzip", gzipped(t, jsonBody(t, td))); resp.StatusCode != 200 {
						err = fmt.Errorf("HTTP %d %q", resp.StatusCode, body)
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				sent = append(sent, names...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var got []string
	h.sink.mu.Lock()
	for _, sp := range h.sink.spans {
		v, _ := sp.Attributes().Get("input.value")
		s := v.Str()
		name := sp.Name()
		if !strings.HasSuffix(s, name) || strings.Trim(s[:len(s)-len(name)], name[:1]) != "" {
			t.Errorf("span %s carries a value that is not its own (%d bytes)", name, len(s))
		}
		got = append(got, name+"/"+fmt.Sprint(len(s)-len(name)))
	}
	h.sink.mu.Unlock()
	slices.Sort(sent)
	slices.Sort(got)
	if len(sent) != workers*perWorker/4*(1+2+3+4) {
		t.Errorf("sent %d spans, want %d", len(sent), workers*perWorker/4*(1+2+3+4))
	}
	if !slices.Equal(got, sent) {
		t.Errorf("received spans differ from sent ones: %d vs %d", len(got), len(sent))
	}
}

// TestGRPCTooLargeCounted: a message over the limit, on the wire or only once decompressed,
// is refused by gRPC while it is read and counted once as too_large.
func TestGRPCTooLargeCounted(t *testing.T) {
	h := start(t, span.Limits{MaxRequestBytes: 64 << 10})
	client := ptraceotlp.NewGRPCClient(h.conn)
	big := traces(1)
	big.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetName(strings.Repeat("n", 70<<10))
	for i, opts := range [][]grpc.CallOption{nil, {grpc.UseCompressor(grpcgzip.Name)}} {
		_, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(big), opts...)
		if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "larger than max") {
			t.Errorf("request %d: %v", i, err)
		}
		// gRPC answers the client before the handler returns from reading, so the count can
		// trail the answer by a moment.
		testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the too-large request counted", func() bool { return h.rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonTooLarge) == float64(i+1) })
	}
	if _, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(traces(1))); err != nil {
		t.Fatal(err)
	}
	if got := h.rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonTooLarge); got != 2 {
		t.Errorf("rejected too_large = %v after a valid export, want 2", got)
	}
}
