package testutil

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Option changes the options of a server RunServer or StartServer starts.
type Option func(*server.Options)

// Port listens on port instead of a free one, so a restarted server is found at the same URL.
func Port(port int) Option { return func(o *server.Options) { o.Port = port } }

// StoreDir enables JetStream with its store in dir. A server started again on the same dir
// finds the streams, consumers and KV buckets the first one stored.
func StoreDir(dir string) Option {
	return func(o *server.Options) { o.JetStream, o.StoreDir = true, dir }
}

// Token requires clients to authenticate with token.
func Token(token string) Option { return func(o *server.Options) { o.Authorization = token } }

// StartServer starts an embedded nats-server on 127.0.0.1 (a free port unless Port says
// otherwise; core NATS only unless StoreDir says otherwise) and waits until it accepts
// connections. The caller shuts it down. It is for code without a testing.TB, such as a child
// process a test starts; tests use RunServer or RunJetStream.
func StartServer(opts ...Option) (*server.Server, error) {
	o := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
	for _, opt := range opts {
		opt(o)
	}
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("new nats-server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("nats-server on port %d not ready within 10s", o.Port)
	}
	return s, nil
}

// RunServer starts an embedded core-NATS server as StartServer does and shuts it down when tb
// ends. A test may shut it down earlier: Shutdown is idempotent.
func RunServer(tb testing.TB, opts ...Option) *server.Server {
	tb.Helper()
	s, err := StartServer(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// RunJetStream starts an embedded nats-server with JetStream storing in a temporary directory
// (StoreDir overrides it, to start again on the same store) and shuts it down when tb ends.
func RunJetStream(tb testing.TB, opts ...Option) *server.Server {
	tb.Helper()
	return RunServer(tb, append([]Option{StoreDir(tb.TempDir())}, opts...)...)
}

// Connect connects to s with opts and closes the connection when tb ends; the JetStream
// context is usable only when s runs JetStream.
func Connect(tb testing.TB, s *server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		tb.Fatalf("connect to %s: %v", s.ClientURL(), err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("jetstream on %s: %v", s.ClientURL(), err)
	}
	return nc, js
}
