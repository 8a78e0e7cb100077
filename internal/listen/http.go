package listen

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// The limits every listener shares unless Limits overrides them (tests inject small values).
const (
	// MaxHeaderBytes bounds a request's line and headers (HTTP) or header list (gRPC). What
	// ragwatch's clients send is a few hundred bytes: an OTLP exporter's content type, user
	// agent and bearer token, a Prometheus scrape's Accept header, a kubelet probe. 32 KiB is
	// ten times a large JWT and four times the 8 KiB nginx allows per header line, and keeps a
	// connection that dribbles headers up to the cap near ConnCost (Go's default, 1 MiB, let
	// 1,500 such connections take 1.6 GB).
	MaxHeaderBytes = 32 << 10
	// ReadHeaderTimeout bounds the time to send the headers (HTTP) or the connection preface
	// and TLS handshake (gRPC).
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout and WriteTimeout bound a request's body and answer; 60 s leaves room for a
	// 30 s CPU profile on /debug/pprof/profile.
	ReadTimeout  = 60 * time.Second
	WriteTimeout = 60 * time.Second
	// IdleTimeout closes a keep-alive connection (HTTP) or a connection without streams (gRPC)
	// after this long without a request.
	IdleTimeout = 2 * time.Minute
)

// Limits are a listener's bounds. Zero fields take the defaults above and DefaultMaxConns.
type Limits struct {
	// MaxConns caps the open connections of each listener (Caps derives it).
	MaxConns          int
	MaxHeaderBytes    int
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
}

// WithDefaults fills the zero fields.
func (l Limits) WithDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = MaxHeaderBytes
	}
	def(&l.ReadHeaderTimeout, ReadHeaderTimeout)
	def(&l.ReadTimeout, ReadTimeout)
	def(&l.WriteTimeout, WriteTimeout)
	def(&l.IdleTimeout, IdleTimeout)
	return l
}

// HTTP returns the server for handler h and the listener to Serve it on: ln under the
// connection cap of lim (labelled name in m), with TLS when conf is set. Every ragwatch HTTP
// server is built here, so they all have the same bounds. errLog receives net/http's own
// messages (a refused header, a failed TLS handshake) at debug level.
func HTTP(ln net.Listener, name string, h http.Handler, conf *tls.Config, lim Limits, m *Metrics, errLog *slog.Logger) (*http.Server, *Listener, net.Listener) {
	lim = lim.WithDefaults()
	limited := Limit(ln, name, lim.MaxConns, m)
	var serve net.Listener = limited
	if conf != nil {
		// TLS above the cap, so that net/http sees a *tls.Conn (r.TLS, client certificates)
		// and the cap counts the connection before its handshake costs anything.
		serve = tls.NewListener(limited, conf)
	}
	if errLog == nil {
		errLog = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           busy(h),
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(errLog.Handler(), slog.LevelDebug),
	}
	return srv, limited, serve
}

// connContext puts the listener's *Conn (under TLS if any) in the connection's context.
func connContext(ctx context.Context, nc net.Conn) context.Context {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if c, ok := nc.(*Conn); ok {
		return withConn(ctx, c)
	}
	return ctx
}

// busy marks the connection as serving while h runs, so that it is not evicted.
func busy(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := connFrom(r.Context())
		c.Begin()
		defer c.End()
		h.ServeHTTP(w, r)
	})
}
