package sampler

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runJetStream starts an embedded nats-server with JetStream on a free port and a store in a
// temporary directory, connects to it with opts, and stops both when tb ends. The server is
// returned so a test can stop it early (Shutdown is idempotent).
func runJetStream(tb testing.TB, opts ...nats.Option) (*server.Server, *nats.Conn, jetstream.JetStream) {
	tb.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: tb.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server not ready")
	}
	tb.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return srv, nc, js
}
