package otlp

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed exports
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ragwatch/ragwatch/collector/ingest"
)

func (r *Receiver) newGRPCServer() *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(r.limits.MaxRequestBytes),
		grpc.StatsHandler(&grpcRejects{metrics: r.set.Metrics}),
		grpc.ChainUnaryInterceptor(r.set.GRPCTokens.UnaryInterceptor(func() {
			r.set.Metrics.Rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonUnauthenticated)
		})),
	}
	if r.set.GRPCTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(r.set.GRPCTLS)))
	}
	if r.set.Refuse != nil {
		// A tap runs before the message is read, so a refused export costs no memory.
		opts = append(opts, grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) {
			if !r.set.Refuse() {
				return ctx, nil
			}
			r.set.Metrics.Rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonOverloaded)
			st, err := status.New(codes.ResourceExhausted, "ragwatch is over its memory limit, retry later").
				WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.set.RefuseRetryAfter)})
			if err != nil {
				return ctx, status.Error(codes.ResourceExhausted, "ragwatch is over its memory limit, retry later")
			}
			return ctx, st.Err()
		}))
	}
	srv := grpc.NewServer(opts...)
	ptraceotlp.RegisterGRPCServer(srv, &grpcTraces{r: r})
	return srv
}

type grpcTraces struct {
	ptraceotlp.UnimplementedGRPCServer
	r *Receiver
}

// Export implements ptraceotlp.GRPCServer.
func (g *grpcTraces) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	resp := ptraceotlp.NewExportResponse()
	_, partial, err := g.r.consume(ctx, ingest.ReceiverOTLPGRPC, req.Traces())
	if err != nil {
		return resp, g.r.grpcStatus(err)
	}
	if partial != nil {
		resp.PartialSuccess().SetRejectedSpans(partial.Rejected)
		resp.PartialSuccess().SetErrorMessage(partial.Reason)
	}
	return resp, nil
}

// grpcStatus maps an error to the OTLP gRPC code: bad input is InvalidArgument (not retried);
// overload is RESOURCE_EXHAUSTED with RetryInfo (the spec's retryable form); any other consumer
// failure is UNAVAILABLE, retryable as well.
func (r *Receiver) grpcStatus(err error) error {
	var rej *rejection
	if errors.As(err, &rej) {
		return status.Error(codes.InvalidArgument, rej.msg)
	}
	code := codes.Unavailable
	msg := "ragwatch cannot take spans right now: " + err.Error()
	if errors.Is(err, ingest.ErrOverloaded) {
		code = codes.ResourceExhausted
	}
	st, derr := status.New(code, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.set.RetryAfter)})
	if derr != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}

// grpcRejects counts requests that gRPC refuses before the handler runs: messages over the
// size limit and undecodable protobuf.
type grpcRejects struct {
	metrics *ingest.Metrics
}

func (h *grpcRejects) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (h *grpcRejects) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (h *grpcRejects) HandleConn(context.Context, stats.ConnStats) {}

func (h *grpcRejects) HandleRPC(_ context.Context, s stats.RPCStats) {
	end, ok := s.(*stats.End)
	if !ok || end.Error == nil {
		return
	}
	st, _ := status.FromError(end.Error)
	msg := st.Message()
	switch {
	case st.Code() == codes.ResourceExhausted && strings.Contains(msg, "larger than max"):
		h.metrics.Rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonTooLarge)
	case st.Code() == codes.Internal && strings.Contains(msg, "failed to unmarshal"):
		h.metrics.Rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonMalformed)
	}
}
