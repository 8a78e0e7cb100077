package natsconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/internal/secret"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func embeddedCfg(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.StoreDir = filepath.Join(t.TempDir(), "store")
	cfg.Embedded.Endpoint = "127.0.0.1:-1"
	return cfg
}

func TestEmbeddedJetStreamAndKV(t *testing.T) {
	cfg := embeddedCfg(t)
	reg := prometheus.NewRegistry()
	c, err := Connect(context.Background(), cfg, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Embedded() || c.ClientURL() == "" {
		t.Fatalf("embedded=%v url=%q", c.Embedded(), c.ClientURL())
	}
	if got := promtestutil.ToFloat64(c.connected); got != 1 {
		t.Fatalf("ragwatch_nats_connected = %v, want 1", got)
	}
	// An outside app reaches the embedded server over TCP, with its credentials.
	app, err := nats.Connect(c.ClientURL(), c.AppCredential().Option())
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	sub, err := c.NC.SubscribeSync("ragwatch.records.x")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := app.Publish("ragwatch.records.x", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil || string(m.Data) != "hello" {
		t.Fatalf("got %v %v", m, err)
	}
	// The server does not echo the connection's own publications (nats.NoEcho): once Flush
	// returns, an echo would already be pending ahead of the app's next message.
	if err := c.NC.Publish("ragwatch.records.x", []byte("own")); err != nil {
		t.Fatal(err)
	}
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := app.Publish("ragwatch.records.x", []byte("after")); err != nil {
		t.Fatal(err)
	}
	if m, err = sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "after" {
		t.Fatalf("after the process's own publication, got %q %v; want the app's \"after\"", m.Data, err)
	}

	ctx := context.Background()
	kv, err := c.KeyValue(ctx, "test_bucket", time.Hour, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := kv.Status(ctx); err != nil || st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.MaxBytes != 1<<20 {
		t.Fatalf("bucket status = %+v, %v; want max_bytes 1MiB", st, err)
	}
	if _, err := kv.Put(ctx, "k1", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	again, err := c.KeyValue(ctx, "test_bucket", time.Hour, 1<<20) // opening twice is fine
	if err != nil {
		t.Fatal(err)
	}
	e, err := again.Get(ctx, "k1")
	if err != nil || string(e.Value()) != "v1" {
		t.Fatalf("kv get = %v %v", e, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.StoreDir, "jetstream")); err != nil {
		t.Fatalf("JetStream must store in store_dir: %v", err)
	}
	c.Close()
	c.Close() // idempotent
	if got := promtestutil.ToFloat64(c.connected); got != 0 {
		t.Fatalf("after Close ragwatch_nats_connected = %v, want 0", got)
	}
}

func TestEmbeddedPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := embeddedCfg(t)
	cfg.Embedded.Endpoint = l.Addr().String()
	_, err = Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
	if err == nil {
		t.Fatal("want an error for a taken port")
	}
	want := "embedded NATS cannot listen on " + l.Addr().String() + " (`nats.embedded.endpoint`)"
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("error = %q, want prefix %q and the cause", err, want)
	}
}

func TestEmbeddedStoreDirNotWritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := embeddedCfg(t)
	cfg.StoreDir = filepath.Join(file, "store") // a path under a regular file: fails even as root
	_, err := Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
	if err == nil {
		t.Fatal("want an error for an unwritable store dir")
	}
	want := "NATS store dir " + cfg.StoreDir + " (`nats.store_dir`) cannot be created: mkdir " + file + ": not a directory"
	if err.Error() != want {
		t.Fatalf("error:\n got %q\nwant %q", err, want)
	}

	if os.Getuid() != 0 { // root writes anywhere; the permission case only means something otherwise
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		cfg.StoreDir = ro
		_, err := Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
		if err == nil || !strings.Contains(err.Error(), "(`nats.store_dir`) is not writable") {
			t.Fatalf("error = %v", err)
		}
	}
}

func TestExternalReconnect(t *testing.T) {
	s1 := testutil.RunJetStream(t, testutil.Token("s3cret"))
	port := s1.Addr().(*net.TCPAddr).Port // s2 listens here again
	t.Setenv("RAGWATCH_TEST_NATS_TOKEN", "s3cret")

	cfg := DefaultConfig()
	cfg.URL = secret.URL(s1.ClientURL())
	cfg.TokenEnv = "RAGWATCH_TEST_NATS_TOKEN"
	cfg.ReconnectWait = 10 * time.Millisecond
	cfg.ReconnectMaxWait = 50 * time.Millisecond
	reg := prometheus.NewRegistry()
	c, err := Connect(context.Background(), cfg, reg, nil)
	if err != nil {
		s1.Shutdown()
		t.Fatal(err)
	}
	defer c.Close()
	if c.Embedded() {
		t.Fatal("url set: must not embed")
	}
	connected := func() float64 { return promtestutil.ToFloat64(c.connected) }
	if connected() != 1 {
		t.Fatalf("connected = %v", connected())
	}
	got := make(chan string, 10)
	if _, err := c.NC.Subscribe("ragwatch.ping", func(m *nats.Msg) { got <- string(m.Data) }); err != nil {
		t.Fatal(err)
	}
	pub := func(srvURL, data string) {
		t.Helper()
		app, err := nats.Connect(srvURL, nats.Token("s3cret"))
		if err != nil {
			t.Fatal(err)
		}
		defer app.Close()
		if err := app.Publish("ragwatch.ping", []byte(data)); err != nil {
			t.Fatal(err)
		}
		if err := app.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.NC.Flush()
	pub(cfg.URL.Reveal(), "one")
	if m := <-got; m != "one" {
		t.Fatalf("got %q", m)
	}

	s1.Shutdown()
	s1.WaitForShutdown()
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "ragwatch_nats_connected to drop to 0", func() bool { return connected() == 0 })

	testutil.RunJetStream(t, testutil.Port(port), testutil.Token("s3cret"))
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "ragwatch_nats_connected back to 1", func() bool { return connected() == 1 })
	_ = c.NC.Flush()
	pub(cfg.URL.Reveal(), "two")
	select {
	case m := <-got:
		if m != "two" {
			t.Fatalf("got %q after reconnect", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no message after reconnect")
	}
	c.Close()
}

func TestExternalBadToken(t *testing.T) {
	s := testutil.RunJetStream(t, testutil.Token("right"))
	cfg := DefaultConfig()
	cfg.URL = secret.URL(s.ClientURL())
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.TokenFile = tokFile
	_, err := Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
	want := "connect to NATS (" + cfg.URL.Reveal() + "; check `nats.url` and credentials): nats: Authorization Violation"
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n got %v\nwant %s", err, want)
	}

	cfg.TokenFile = ""
	cfg.TokenEnv = "RAGWATCH_TEST_UNSET_TOKEN"
	_, err = Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
	want = "NATS token (`nats.token_env` / `nats.token_file`): environment variable RAGWATCH_TEST_UNSET_TOKEN is not set"
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n got %v\nwant %s", err, want)
	}
}

func TestBackoff(t *testing.T) {
	b := backoff(100*time.Millisecond, time.Second)
	for _, tc := range []struct {
		attempt int
		base    time.Duration
	}{{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 400 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {50, time.Second}} {
		d := b(tc.attempt)
		lo, hi := tc.base-tc.base/10, tc.base+tc.base/10
		if d < lo || d > hi {
			t.Fatalf("attempt %d: %v not within [%v, %v]", tc.attempt, d, lo, hi)
		}
	}
}

// The embedded server's JetStream store is limited by nats.embedded.max_store: a stream whose
// cap does not fit is refused when created, so the store dir never outgrows its volume.
func TestEmbeddedMaxStore(t *testing.T) {
	cfg := embeddedCfg(t)
	cfg.Embedded.MaxStore = 4 << 20
	c, err := Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.KeyValue(ctx, "fits", 0, 3<<20); err != nil {
		t.Fatalf("a 3 MiB bucket in a 4 MiB store: %v", err)
	}
	_, err = c.KeyValue(ctx, "too_big", 0, 2<<20)
	if err == nil || !IsStorageFull(err) {
		t.Fatalf("a second 2 MiB bucket in a 4 MiB store: err = %v, want insufficient storage", err)
	}
}

func TestIsStorageFull(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&jetstream.APIError{ErrorCode: 10023, Description: "insufficient resources"}, true},
		{&jetstream.APIError{ErrorCode: 10047, Description: "insufficient storage resources available"}, true},
		{&jetstream.APIError{ErrorCode: 10077, Description: "maximum bytes exceeded"}, true},
		{&jetstream.APIError{ErrorCode: 10077, Description: "maximum messages exceeded"}, false},
		{&jetstream.APIError{ErrorCode: 10059, Description: "stream not found"}, false},
		{errors.New("nats: timeout"), false},
		{fmt.Errorf("put: %w", errors.New("nats: maximum bytes exceeded")), true},
		{fmt.Errorf("save alert state k: %w", fmt.Errorf("%w: stream KV_x: no space left on device", ErrStoreWriteFailing)), true},
		{&jetstream.APIError{ErrorCode: 10077, Description: "write /data/1.blk: too many open files"}, true},
		{&os.PathError{Op: "write", Path: "/data/1.blk", Err: syscall.ENOSPC}, true},
		{&os.PathError{Op: "open", Path: "/data/2.blk", Err: syscall.EMFILE}, true},
		{&os.PathError{Op: "open", Path: "/data/2.blk", Err: syscall.EACCES}, false},
	} {
		if got := IsStorageFull(tc.err); got != tc.want {
			t.Errorf("IsStorageFull(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// An external cluster with users: nats.user and the password from a file (a mounted Secret)
// log in without putting the password in nats.url; a wrong one is refused.
func TestExternalUserPassword(t *testing.T) {
	s := testutil.RunJetStream(t, func(o *server.Options) { o.Username, o.Password = "sidecar", "s3cret-pw" })
	cfg := DefaultConfig()
	cfg.URL = secret.URL(s.ClientURL())
	cfg.User = "sidecar"
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte("s3cret-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.PasswordFile = pwFile
	c, err := Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	if err := os.WriteFile(pwFile, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
	if err == nil || !strings.Contains(err.Error(), "Authorization Violation") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong password: err = %v", err)
	}
}
