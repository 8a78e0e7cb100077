package listen

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
)

// KeepaliveMinTime is the shortest interval between a client's keepalive pings the gRPC
// server accepts; a client pinging faster is sent GOAWAY. The OpenTelemetry Collector's and
// SDKs' exporters ping every 30 s at most when they ping at all.
const KeepaliveMinTime = 10 * time.Second

// GRPC puts ln under the connection cap of lim (labelled name in m) and returns it with the
// server options that bound a gRPC server's connections: the header list size, the time to
// complete the connection preface and handshake, keepalive enforcement (pings faster than
// KeepaliveMinTime end the connection), a connection without streams closed after
// lim.IdleTimeout, and the stats hook that keeps a connection with an export in flight from
// being evicted.
func GRPC(ln net.Listener, name string, lim Limits, m *Metrics) (*Listener, []grpc.ServerOption) {
	lim = lim.WithDefaults()
	l := Limit(ln, name, lim.MaxConns, m)
	return l, []grpc.ServerOption{
		grpc.MaxHeaderListSize(uint32(lim.MaxHeaderBytes)),
		grpc.ConnectionTimeout(lim.ReadHeaderTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: lim.IdleTimeout,
			// Ping a connection silent this long, and close it if the ping is not answered:
			// a peer that vanished without a FIN does not hold its place until the idle
			// timeout's next check.
			Time:    lim.IdleTimeout / 2,
			Timeout: 20 * time.Second,
		}),
		grpc.StatsHandler(grpcBusy{l}),
	}
}

// grpcBusy marks a connection as serving from an RPC's Begin to its End.
type grpcBusy struct{ l *Listener }

func (h grpcBusy) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if c := h.l.lookup(info.RemoteAddr); c != nil {
		return withConn(ctx, c)
	}
	return ctx
}

func (grpcBusy) HandleConn(context.Context, stats.ConnStats) {}

func (grpcBusy) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (grpcBusy) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.Begin:
		connFrom(ctx).Begin()
	case *stats.End:
		connFrom(ctx).End()
	}
}
