package otlp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/internal/tlsauth"
)

func startGRPC(t *testing.T, set Settings) (*harness, ptraceotlp.GRPCClient) {
	t.Helper()
	set.GRPCEndpoint = "127.0.0.1:0"
	h := startWith(t, set)
	return h, ptraceotlp.NewGRPCClient(h.conn)
}

// The token is checked on the headers, before gRPC reads the message: an unauthenticated
// export over the size limit is refused as Unauthenticated, not read up to the limit and
// refused as too large, and nothing is decoded.
func TestGRPCTokenCheckedBeforeTheMessageIsRead(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := tlsauth.NewTokens(config.BearerAuth{TokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	h, client := startGRPC(t, Settings{GRPCTokens: tok, Limits: span.Limits{MaxRequestBytes: 64 << 10}})
	huge := traces(1)
	huge.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("input.value", strings.Repeat("x", 256<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, req := range []ptrace.Traces{huge, traces(3)} {
		_, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(req))
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("export without a token = %v, want Unauthenticated", err)
		}
	}
	_, err = client.Export(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong"), ptraceotlp.NewExportRequestFromTraces(traces(3)))
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("export with a wrong token = %v", err)
	}
	if got := h.rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonUnauthenticated); got != 3 {
		t.Errorf("rejected{unauthenticated} = %v, want 3", got)
	}
	if got := h.rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonTooLarge); got != 0 {
		t.Errorf("rejected{too_large} = %v: the unauthenticated message was read", got)
	}
	if got := h.received(ingest.ReceiverOTLPGRPC); got != 0 || h.sink.count() != 0 {
		t.Errorf("spans received %v, consumed %d without a token", got, h.sink.count())
	}
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	if _, err := client.Export(authed, ptraceotlp.NewExportRequestFromTraces(traces(3))); err != nil {
		t.Fatalf("export with the token: %v", err)
	}
	if h.sink.count() != 3 {
		t.Errorf("consumed %d spans with the token, want 3", h.sink.count())
	}
	if _, err := client.Export(authed, ptraceotlp.NewExportRequestFromTraces(huge)); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("an authenticated oversized export = %v, want ResourceExhausted", err)
	}
}

// blockingSink holds every export until release is closed.
type blockingSink struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingSink) ConsumeTraces(ctx context.Context, _ ptrace.Traces) error {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil
}

// MaxConcurrentStreams bounds the exports in flight on one connection: with 1, a second
// export waits until the first is answered.
func TestGRPCMaxConcurrentStreams(t *testing.T) {
	b := &blockingSink{entered: make(chan struct{}, 4), release: make(chan struct{})}
	_, client := startGRPC(t, Settings{Next: b, MaxConcurrentStreams: 1})
	first := make(chan error, 1)
	go func() {
		_, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(traces(1)))
		first <- err
	}()
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first export never reached the consumer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(traces(1))); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a second stream on a full connection = %v, want DeadlineExceeded", err)
	}
	if len(b.entered) != 0 {
		t.Error("the second export reached the consumer past the stream limit")
	}
	close(b.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, "a stream after the first ended", func() error {
		if _, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(traces(1))); err != nil {
			return err
		}
		return nil
	})
}
