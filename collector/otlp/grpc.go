package otlp

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed exports
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/ingest"
)

// DefaultMaxConcurrentStreams bounds the exports in flight on one gRPC connection when
// Settings.MaxConcurrentStreams is 0. gRPC's own default is unbounded: one client could hold
// thousands of streams, each with a message on its way in. 100 is HTTP/2's recommended floor
// and far above what an OTLP exporter opens (its batch processor sends one export at a time).
const DefaultMaxConcurrentStreams = 100

// streamWorkers is how many goroutines serve exports: one a core, and at least as many as
// exporters keep in flight. An OpenTelemetry SDK's batch processor sends one export at a
// time; a Collector in front sends up to its sending queue's num_consumers, 10 by default.
// An idle worker holds only its stack (a few KB).
func streamWorkers() uint32 {
	return uint32(max(runtime.GOMAXPROCS(0), minStreamWorkers))
}

const minStreamWorkers = 10

// newGRPCServer builds the gRPC server with bounds, the options of listen.GRPC for its
// listener (header list size, handshake time, keepalive, connection cap).
func (r *Receiver) newGRPCServer(bounds []grpc.ServerOption) *grpc.Server {
	streams := r.set.MaxConcurrentStreams
	if streams == 0 {
		streams = DefaultMaxConcurrentStreams
	}
	opts := append(slices.Clip(bounds), // never writes into the caller's array
		grpc.MaxRecvMsgSize(r.limits.MaxRequestBytes),
		grpc.MaxConcurrentStreams(streams),
		// Exports run on long-lived goroutines whose stacks have grown to what decoding needs,
		// instead of a new goroutine per export that grows its stack again each time
		// (runtime.newstack, copystack). An export that finds every worker busy gets its own
		// goroutine, as without workers: this bounds nothing. docs/performance.md measures it.
		grpc.NumStreamWorkers(streamWorkers()),
	)
	if r.set.GRPCTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(r.set.GRPCTLS)))
	}
	if r.set.GRPCTokens != nil || r.set.Refuse != nil {
		// A tap runs on the headers, before the message is read: an export without a valid
		// token, or one that arrives over the memory limit, costs neither the read nor the
		// decoding of its body.
		opts = append(opts, grpc.InTapHandle(r.tap))
	}
	// The service takes the message as raw bytes and decodes it with pdata itself, so that a
	// malformed request is answered INVALID_ARGUMENT with the reason (and counted), as the
	// OTLP spec asks; through gRPC's codec it would be an opaque INTERNAL.
	opts = append(opts, grpc.ForceServerCodecV2(rawCodec{}))
	opts = append(opts, r.extraGRPCOpts...)
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&traceServiceDesc, &grpcTraces{r: r})
	if r.set.Logs != nil {
		srv.RegisterService(&logsServiceDesc, &grpcLogs{grpcTraces{r: r}})
	}
	return srv
}

// tap checks an export's headers: the bearer token first (an unauthenticated client learns
// nothing about the memory state), then the memory limit.
func (r *Receiver) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if err := r.set.GRPCTokens.CheckMetadata(info.Header); err != nil {
		r.set.Metrics.Rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonUnauthenticated)
		return ctx, status.Error(codes.Unauthenticated, err.Error())
	}
	if r.set.Refuse == nil || !r.set.Refuse() {
		return ctx, nil
	}
	return ctx, r.grpcOverloaded()
}

// grpcOverloaded counts a refusal by the memory guard and returns RESOURCE_EXHAUSTED with
// RetryInfo.
func (r *Receiver) grpcOverloaded() error {
	r.set.Metrics.Rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonOverloaded)
	st, err := status.New(codes.ResourceExhausted, "ragwatch is over its memory limit, retry later").
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.set.RefuseRetryAfter)})
	if err != nil {
		return status.Error(codes.ResourceExhausted, "ragwatch is over its memory limit, retry later")
	}
	return st.Err()
}

// exportMethod is the OTLP trace export's full gRPC method name.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// traceServiceDesc is OTLP's TraceService with Export taking and returning protobuf bytes.
var traceServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
	HandlerType: (*rawExporter)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler:    exportHandler(exportMethod),
	}},
	Metadata: "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

// logsExportMethod is the OTLP log export's full gRPC method name.
const logsExportMethod = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"

// logsServiceDesc is OTLP's LogsService with Export taking and returning protobuf bytes, as
// traceServiceDesc.
var logsServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.logs.v1.LogsService",
	HandlerType: (*rawExporter)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler:    exportHandler(logsExportMethod),
	}},
	Metadata: "opentelemetry/proto/collector/logs/v1/logs_service.proto",
}

// grpcLogs serves LogsService; receiveFailed is grpcTraces'.
type grpcLogs struct {
	grpcTraces
}

// export hands one ExportLogsServiceRequest to the LogsConsumer. A fully accepted export's
// response is empty, as for traces.
func (g *grpcLogs) export(ctx context.Context, in []byte) ([]byte, error) {
	if g.r.set.Admit != nil {
		release, ok := g.r.set.Admit(int64(len(in)))
		if !ok {
			return nil, g.r.grpcOverloaded()
		}
		defer release()
	}
	malformed, err := g.r.consumeLogs(ctx, ingest.ReceiverOTLPGRPC, in)
	switch {
	case malformed != nil:
		return nil, status.Error(codes.InvalidArgument, decodeMessage(ctProtobuf, malformed))
	case err != nil:
		return nil, g.r.grpcStatus(err)
	}
	return emptyResponse, nil
}

// exportHandler is the handler of an Export method (its full name method) taking the
// request's bytes: a rawExporter decodes them itself.
func exportHandler(method string) func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		exp := srv.(rawExporter)
		in := &pooledMessage{}
		if err := dec(in); err != nil {
			exp.receiveFailed(err)
			return nil, err
		}
		// The decoded request copies what it keeps, so the bytes go back to their pool
		// when the handler returns, whether the interceptor let the call through or not.
		defer in.free()
		if interceptor == nil {
			return exp.export(ctx, in.bytes())
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: method}
		return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
			return exp.export(ctx, req.(*pooledMessage).bytes())
		})
	}
}

type rawExporter interface {
	export(ctx context.Context, in []byte) ([]byte, error)
	receiveFailed(err error)
}

type grpcTraces struct {
	r *Receiver
}

// export decodes one ExportTraceServiceRequest, hands it over and encodes the response.
func (g *grpcTraces) export(ctx context.Context, in []byte) ([]byte, error) {
	if g.r.set.Admit != nil {
		// The tap saw no size; the message's is known now, before decoding multiplies it.
		release, ok := g.r.set.Admit(int64(len(in)))
		if !ok {
			return nil, g.r.grpcOverloaded()
		}
		defer release()
	}
	if pc, ok := g.r.set.Next.(ProtoConsumer); ok {
		malformed, err := g.r.consumeProto(ctx, ingest.ReceiverOTLPGRPC, pc, in)
		switch {
		case malformed != nil:
			return nil, status.Error(codes.InvalidArgument, decodeMessage(ctProtobuf, malformed))
		case err != nil:
			return nil, g.r.grpcStatus(err)
		}
		return emptyResponse, nil
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(in); err != nil {
		g.r.set.Metrics.Rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonMalformed)
		return nil, status.Error(codes.InvalidArgument, decodeMessage(ctProtobuf, err))
	}
	_, partial, err := g.r.consume(ctx, ingest.ReceiverOTLPGRPC, req.Traces())
	if err != nil {
		return nil, g.r.grpcStatus(err)
	}
	if partial == nil {
		return emptyResponse, nil
	}
	resp := ptraceotlp.NewExportResponse()
	resp.PartialSuccess().SetRejectedSpans(partial.Rejected)
	resp.PartialSuccess().SetErrorMessage(partial.Reason)
	return resp.MarshalProto()
}

// emptyResponse is the encoded ExportTraceServiceResponse of a fully accepted export, made
// once: every call shares it (gRPC and net/http only read it).
var emptyResponse, emptyResponseJSON = func() ([]byte, []byte) {
	resp := ptraceotlp.NewExportResponse()
	p, err := resp.MarshalProto()
	if err != nil {
		panic(err)
	}
	j, err := resp.MarshalJSON()
	if err != nil {
		panic(err)
	}
	return p, j
}()

// pooledMessage holds one request's bytes without a fresh copy of every message (a 50-trace
// export is ≈ 350 KB): a message gRPC read into one buffer is referenced as it is, one spread
// over several buffers (one per HTTP/2 frame) is copied into a body buffer of the HTTP
// receiver's pool, which, unlike gRPC's default pool, does not clear a buffer before reuse.
type pooledMessage struct {
	ref  mem.Buffer
	body *[]byte
}

func (m *pooledMessage) set(data mem.BufferSlice) {
	if len(data) == 1 {
		data[0].Ref() // gRPC frees data after Unmarshal; this reference lasts until free
		m.ref = data[0]
		return
	}
	m.body = getBody()
	n := data.Len()
	if cap(*m.body) < n {
		*m.body = make([]byte, n, bodyCap(n))
	}
	*m.body = (*m.body)[:n]
	data.CopyTo(*m.body)
}

func (m *pooledMessage) bytes() []byte {
	switch {
	case m.ref != nil:
		return m.ref.ReadOnlyData()
	case m.body != nil:
		return *m.body
	}
	return nil
}

func (m *pooledMessage) free() {
	if m.ref != nil {
		m.ref.Free()
		m.ref = nil
	}
	if m.body != nil {
		putBody(m.body)
		m.body = nil
	}
}

// rawCodec hands message bytes through unchanged; the service decodes them itself. It is named
// "proto" because that is the content subtype OTLP exporters send.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("otlp: cannot encode %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch p := v.(type) {
	case *pooledMessage:
		p.set(data)
	case *[]byte:
		*p = data.Materialize()
	default:
		return fmt.Errorf("otlp: cannot decode into %T", v)
	}
	return nil
}

func (rawCodec) Name() string { return "proto" }

// grpcStatus maps an error to the OTLP gRPC code: bad input is InvalidArgument (not retried);
// overload is RESOURCE_EXHAUSTED with RetryInfo (the spec's retryable form); any other consumer
// failure is UNAVAILABLE, retryable as well.
func (r *Receiver) grpcStatus(err error) error {
	var rej *span.Error
	if errors.As(err, &rej) {
		return status.Error(codes.InvalidArgument, rej.Msg)
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

// receiveFailed counts a message gRPC refused while reading it, before the handler had it:
// one over the size limit (also after decompression). This is where gRPC reads the message,
// so no stats handler (which costs every RPC its events) is needed to see it.
func (g *grpcTraces) receiveFailed(err error) {
	st, _ := status.FromError(err)
	if st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max") {
		g.r.set.Metrics.Rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonTooLarge)
	}
}
