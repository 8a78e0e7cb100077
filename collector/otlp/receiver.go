package otlp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/listen"
	"github.com/ragwatch/ragwatch/internal/tlsauth"
)

// TracesConsumer takes decoded, validated spans. It must not keep td after returning unless it
// copies what it needs. Returning an error wrapping ingest.ErrOverloaded asks the sender to
// retry later; an *ingest.PartialError reports dropped spans.
type TracesConsumer interface {
	ConsumeTraces(ctx context.Context, td ptrace.Traces) error
}

// TracesConsumerFunc adapts a function to TracesConsumer.
type TracesConsumerFunc func(ctx context.Context, td ptrace.Traces) error

// ConsumeTraces calls f.
func (f TracesConsumerFunc) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return f(ctx, td)
}

// ProtoConsumer is a TracesConsumer that decodes OTLP protobuf itself, straight into what it
// keeps (the assembler, with span.DecodeProto), instead of through pdata. The receivers hand it
// a protobuf export's bytes, which it must not keep, with the receivers' Limits; it answers as
// the pdata path would: the *span.Error the receivers' own check would give (its Reason
// ingest.ReasonMalformed for a request pdata cannot decode), taking nothing, else the number
// of spans taken or a consumer error. OTLP/JSON still goes through pdata and ConsumeTraces.
type ProtoConsumer interface {
	TracesConsumer
	ConsumeProto(ctx context.Context, body []byte, lim span.Limits) (spans int, err error)
}

// LogsConsumer takes OTLP log exports (ExportLogsServiceRequest) as protobuf bytes, which it
// must not keep, with the receivers' Limits, and answers as a ProtoConsumer does: the
// *span.Error that refuses the request (its Reason ingest.ReasonMalformed for bytes that are
// not an OTLP request), taking nothing, else the number of log records taken or a consumer
// error. OTLP/JSON logs reach it re-encoded as protobuf by pdata.
type LogsConsumer interface {
	ConsumeLogs(ctx context.Context, body []byte, lim span.Limits) (records int, err error)
}

// Settings configures the receivers. An empty endpoint disables that receiver.
type Settings struct {
	GRPCEndpoint string // host:port, e.g. "127.0.0.1:4317"
	HTTPEndpoint string // host:port, e.g. "127.0.0.1:4318"
	Limits       span.Limits
	// RetryAfter is what overloaded clients are told to wait; default 1s.
	RetryAfter time.Duration
	Next       TracesConsumer
	// Logs, when set, takes OTLP log exports: the gRPC LogsService and POST LogsPath are
	// served, with the same limits, authentication and admission as traces; nil serves neither.
	Logs    LogsConsumer
	Metrics *ingest.Metrics
	// GRPCTLS and HTTPTLS serve TLS when set (mTLS when they require client certificates).
	GRPCTLS, HTTPTLS *tls.Config
	// GRPCTokens and HTTPTokens, when set, require a bearer token on every export.
	GRPCTokens, HTTPTokens *tlsauth.Tokens
	// MaxConcurrentStreams bounds the gRPC exports in flight on one connection; 0 takes
	// DefaultMaxConcurrentStreams.
	MaxConcurrentStreams uint32
	// Refuse, when set, is asked before an export is read (the memory limit): true answers
	// gRPC RESOURCE_EXHAUSTED with RetryInfo and HTTP 503 with Retry-After, both
	// RefuseRetryAfter (default RetryAfter), counted as reason "overloaded".
	Refuse           func() bool
	RefuseRetryAfter time.Duration
	// Admit, when set, is asked with a request's size before it is decoded (HTTP: before the
	// body is read, with its Content-Length or, when that does not bound it, MaxRequestBytes;
	// gRPC: with the message's length once read) and answers like Refuse; release is called
	// when the request is handled. It keeps concurrent large requests from all passing the
	// memory check before any of them allocates (memlimit.Guard.Admit).
	Admit func(size int64) (release func(), ok bool)
	// Listen bounds both listeners (header size, timeouts, connection cap, gRPC keepalive);
	// zero fields take listen's defaults. ListenMetrics counts their connections as listener
	// "otlp_grpc" and "otlp_http"; nil counts nothing.
	Listen        listen.Limits
	ListenMetrics *listen.Metrics
	Logger        *slog.Logger
}

// Receiver runs the OTLP gRPC and HTTP trace receivers.
type Receiver struct {
	set    Settings
	limits span.Limits
	log    *slog.Logger

	mu       sync.Mutex // guards the fields below
	grpcSrv  *grpc.Server
	httpSrv  *http.Server
	grpcAddr net.Addr
	httpAddr net.Addr
	started  bool
	stopped  bool

	wg sync.WaitGroup

	extraGRPCOpts []grpc.ServerOption // tests and benchmarks only
}

// New checks the settings and builds the receivers without listening yet.
func New(set Settings) (*Receiver, error) {
	if set.Next == nil {
		return nil, errors.New("otlp: Next consumer is required")
	}
	if set.Metrics == nil {
		return nil, errors.New("otlp: Metrics is required")
	}
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	if set.RetryAfter <= 0 {
		set.RetryAfter = time.Second
	}
	if set.RefuseRetryAfter <= 0 {
		set.RefuseRetryAfter = set.RetryAfter
	}
	return &Receiver{set: set, limits: set.Limits.WithDefaults(), log: set.Logger}, nil
}

// Start binds the listeners and serves in the background. It returns once both listen, so the
// process is ready when Start returns nil. A half-done start is undone.
func (r *Receiver) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("otlp: receiver already started")
	}
	r.started = true
	r.stopped = false
	r.mu.Unlock()

	var lc net.ListenConfig
	if ep := r.set.GRPCEndpoint; ep != "" {
		ln, err := lc.Listen(ctx, "tcp", ep)
		if err != nil {
			return errors.Join(fmt.Errorf("start OTLP gRPC receiver on %s: %w", ep, err), r.Shutdown(ctx))
		}
		limited, bounds := listen.GRPC(ln, "otlp_grpc", r.set.Listen, r.set.ListenMetrics)
		srv := r.newGRPCServer(bounds)
		r.mu.Lock()
		r.grpcSrv, r.grpcAddr = srv, ln.Addr()
		r.mu.Unlock()
		r.wg.Go(func() {
			if err := srv.Serve(limited); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				r.log.Error("OTLP gRPC receiver stopped", "err", err)
			}
		})
		r.log.Info("OTLP gRPC receiver listening", "endpoint", ln.Addr().String(), "max_connections", limited.Cap())
	}
	if ep := r.set.HTTPEndpoint; ep != "" {
		ln, err := lc.Listen(ctx, "tcp", ep)
		if err != nil {
			return errors.Join(fmt.Errorf("start OTLP HTTP receiver on %s: %w", ep, err), r.Shutdown(ctx))
		}
		handler := r.set.HTTPTokens.HTTP(r.HTTPHandler(), func() {
			r.set.Metrics.Rejected(ingest.ReceiverOTLPHTTP, ingest.ReasonUnauthenticated)
		})
		srv, limited, serveLn := listen.HTTP(ln, "otlp_http", handler, r.set.HTTPTLS, r.set.Listen, r.set.ListenMetrics, r.log)
		r.mu.Lock()
		r.httpSrv, r.httpAddr = srv, ln.Addr()
		r.mu.Unlock()
		r.wg.Go(func() {
			if err := srv.Serve(serveLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				r.log.Error("OTLP HTTP receiver stopped", "err", err)
			}
		})
		r.log.Info("OTLP HTTP receiver listening", "endpoint", ln.Addr().String(), "max_connections", limited.Cap())
	}
	return nil
}

// Shutdown stops accepting, lets in-flight requests finish until ctx ends, and waits for the
// serve loops. It is idempotent and safe without Start.
func (r *Receiver) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	r.started = false
	grpcSrv, httpSrv := r.grpcSrv, r.httpSrv
	r.grpcSrv, r.httpSrv = nil, nil
	r.mu.Unlock()

	var errs []error
	if httpSrv != nil {
		if err := httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop OTLP HTTP receiver: %w", err))
			_ = httpSrv.Close()
		}
	}
	if grpcSrv != nil {
		done := make(chan struct{})
		go func() { grpcSrv.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			grpcSrv.Stop()
			<-done
			errs = append(errs, fmt.Errorf("stop OTLP gRPC receiver: %w", ctx.Err()))
		}
	}
	r.wg.Wait()
	return errors.Join(errs...)
}

// GRPCAddr is the bound gRPC address, nil when disabled or not started.
func (r *Receiver) GRPCAddr() net.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grpcAddr
}

// HTTPAddr is the bound HTTP address, nil when disabled or not started.
func (r *Receiver) HTTPAddr() net.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.httpAddr
}

// Ready reports whether the receivers are listening.
func (r *Receiver) Ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.stopped {
		return errors.New("OTLP receivers are not listening")
	}
	return nil
}

// consume validates td and hands it over. It returns the number of spans accepted, a partial
// rejection to report, or an error: a *span.Error (bad input, not retryable) or a consumer
// error.
func (r *Receiver) consume(ctx context.Context, receiver string, td ptrace.Traces) (accepted int, partial *ingest.PartialError, err error) {
	n, rej := r.limits.Check(td)
	if rej != nil {
		r.set.Metrics.Rejected(receiver, rej.Reason)
		r.log.Debug("OTLP request rejected", "receiver", receiver, "reason", rej.Reason, "err", rej.Msg)
		return 0, nil, rej
	}
	if n == 0 {
		return 0, nil, nil
	}
	if err := r.set.Next.ConsumeTraces(ctx, td); err != nil {
		if errors.As(err, &partial) {
			accepted = n - int(partial.Rejected)
			if accepted < 0 {
				accepted = 0
			}
			r.set.Metrics.Spans(receiver, accepted)
			return accepted, partial, nil
		}
		// Every other consumer error is answered as retryable, so count it as overload too.
		r.set.Metrics.Rejected(receiver, ingest.ReasonOverloaded)
		r.log.Debug("OTLP consumer refused request", "receiver", receiver, "err", err)
		return 0, nil, err
	}
	r.set.Metrics.Spans(receiver, n)
	return n, nil, nil
}

// consumeProto hands a protobuf export to a ProtoConsumer and counts it as consume does. It
// returns malformed (the message, for decodeMessage) when pdata could not have decoded body;
// the *span.Error when the limits refuse it; else a consumer error or nil.
func (r *Receiver) consumeProto(ctx context.Context, receiver string, pc ProtoConsumer, body []byte) (malformed error, err error) {
	n, err := pc.ConsumeProto(ctx, body, r.limits)
	if err == nil {
		if n > 0 {
			r.set.Metrics.Spans(receiver, n)
		}
		return nil, nil
	}
	return r.refused(receiver, err)
}

// consumeLogs hands a protobuf log export to the LogsConsumer and answers as consumeProto.
func (r *Receiver) consumeLogs(ctx context.Context, receiver string, body []byte) (malformed error, err error) {
	n, err := r.set.Logs.ConsumeLogs(ctx, body, r.limits)
	if err == nil {
		if n > 0 {
			r.set.Metrics.LogRecords(receiver, n)
		}
		return nil, nil
	}
	return r.refused(receiver, err)
}

// refused counts and sorts the error of a consumer that decodes bytes itself: malformed when
// they are not an OTLP request, the *span.Error of the limits, or a consumer error.
func (r *Receiver) refused(receiver string, err error) (malformed error, _ error) {
	var rej *span.Error // escapes into errors.As: declared only when there is an error
	switch {
	case errors.As(err, &rej) && rej.Reason == ingest.ReasonMalformed:
		r.set.Metrics.Rejected(receiver, ingest.ReasonMalformed)
		return rej, nil
	case errors.As(err, &rej):
		r.set.Metrics.Rejected(receiver, rej.Reason)
		r.log.Debug("OTLP request rejected", "receiver", receiver, "reason", rej.Reason, "err", rej.Msg)
		return nil, rej
	}
	r.set.Metrics.Rejected(receiver, ingest.ReasonOverloaded)
	r.log.Debug("OTLP consumer refused request", "receiver", receiver, "err", err)
	return nil, err
}
