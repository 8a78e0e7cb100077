package natsconn

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

func connectEmbedded(t *testing.T, cfg Config, logger *slog.Logger) *Conn {
	t.Helper()
	c, err := Connect(context.Background(), cfg, prometheus.NewRegistry(), logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// An unauthenticated client is refused on connect, on loopback and on 0.0.0.0 alike, so it
// can neither read sampled records nor publish scores.
func TestEmbeddedRefusesUnauthenticated(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "0.0.0.0"} {
		t.Run(host, func(t *testing.T) {
			cfg := embeddedCfg(t)
			cfg.Embedded.Endpoint = host + ":-1"
			c := connectEmbedded(t, cfg, nil)
			nc, err := nats.Connect(c.ClientURL(), nats.MaxReconnects(0))
			if err == nil {
				nc.Close()
				t.Fatal("unauthenticated client connected")
			}
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("err = %v, want an authorization violation", err)
			}
			wrong := c.AppCredential()
			nc, err = nats.Connect(c.ClientURL(), nats.UserInfo(wrong.User, "not-the-password"), nats.MaxReconnects(0))
			if err == nil {
				nc.Close()
				t.Fatal("wrong password connected")
			}
		})
	}
}

// asyncErrs collects the errors the server reports to a client (permission violations).
func asyncErrs() (nats.Option, <-chan error) {
	ch := make(chan error, 16)
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case ch <- err:
		default:
		}
	}), ch
}

func wantViolation(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("%s: err = %v, want a permissions violation", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no permissions violation reported", what)
	}
}

// The app user may publish records, feedback and OTLP, and nothing else: no subscribe (it
// cannot read sampled records), no scores, no scoring queue, no JetStream API.
func TestEmbeddedAppUserLeastPrivilege(t *testing.T) {
	cfg := embeddedCfg(t)
	c := connectEmbedded(t, cfg, nil)
	onErr, errs := asyncErrs()
	app, err := nats.Connect(c.ClientURL(), c.AppCredential().Option(), onErr)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()

	// ragwatch's own connection sees everything.
	all, err := c.NC.SubscribeSync("ragwatch.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"ragwatch.records.support", "ragwatch.feedback.support", "ragwatch.otlp.traces"} {
		if err := app.Publish(subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
		m, err := all.NextMsg(5 * time.Second)
		if err != nil || m.Subject != subj {
			t.Fatalf("publish on %s: got %v, %v", subj, m, err)
		}
	}

	sub, err := app.SubscribeSync("ragwatch.>")
	if err != nil {
		t.Fatal(err)
	}
	_ = app.Flush()
	wantViolation(t, errs, "subscribe ragwatch.>")
	if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("app read %s", m.Subject)
	}

	for _, subj := range []string{"ragwatch.scores.support", "ragwatch.queue.support", "$JS.API.STREAM.LIST"} {
		if err := app.Publish(subj, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		_ = app.Flush()
		wantViolation(t, errs, "publish "+subj)
	}
	if m, err := all.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("forbidden publish reached %s", m.Subject)
	}

	js, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	denied, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := js.AccountInfo(denied); err == nil {
		t.Fatal("app user reached the JetStream API")
	}
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "INGEST_TEST", Subjects: []string{"ragwatch.records.>"}}); err != nil {
		t.Fatal(err)
	}
	denied, cancel = context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := js.DeleteStream(denied, "INGEST_TEST"); err == nil {
		t.Fatal("app user deleted a stream")
	}
	if _, err := c.JS.Stream(ctx, "INGEST_TEST"); err != nil {
		t.Fatalf("stream gone after the app's delete: %v", err)
	}

	// In jetstream mode the app publishes with an acknowledgement: the ack comes back on its
	// own inbox, the one subject it may subscribe to.
	if err := all.Unsubscribe(); err != nil { // a drained sync subscription waits for its reader
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, "ragwatch.records.acked", []byte("x"))
	if err != nil || ack.Stream != "INGEST_TEST" {
		t.Fatalf("acked publish: %v, %v", ack, err)
	}
	for len(errs) > 0 {
		<-errs // the denied API calls above
	}
	if _, err := app.SubscribeSync("_INBOX.>"); err != nil {
		t.Fatal(err)
	}
	_ = app.Flush()
	wantViolation(t, errs, "subscribe _INBOX.>")
}

// Without configured passwords, ragwatch generates them at first start into store_dir with mode
// 0600, logs their paths (never their values) and reuses them after a restart, so an app that
// read the file keeps working.
func TestGeneratedCredentialsPersist(t *testing.T) {
	cfg := embeddedCfg(t)
	var logs testutil.Buffer
	// Debug level: nats-server's own notices are logged there too, and must not leak either.
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	c, err := Connect(context.Background(), cfg, prometheus.NewRegistry(), logger)
	if err != nil {
		t.Fatal(err)
	}
	first, own := c.AppCredential(), c.ragwatch
	c.Close()

	for _, cred := range []Credential{first, own} {
		if cred.Password.Reveal() == "" || len(cred.Password.Reveal()) < 32 {
			t.Fatalf("%s: weak generated password (%d chars)", cred.User, len(cred.Password.Reveal()))
		}
		if filepath.Dir(cred.File) != cfg.StoreDir {
			t.Fatalf("%s: file %s not in store_dir %s", cred.User, cred.File, cfg.StoreDir)
		}
		fi, err := os.Stat(cred.File)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, want 0600", cred.File, fi.Mode().Perm())
		}
		if !strings.Contains(logs.String(), cred.File) {
			t.Fatalf("log does not name %s:\n%s", cred.File, logs.String())
		}
		if strings.Contains(logs.String(), cred.Password.Reveal()) {
			t.Fatalf("log holds the password of %s:\n%s", cred.User, logs.String())
		}
	}
	if first.Password == own.Password {
		t.Fatal("app and ragwatch share a password")
	}

	// A password file others can read is narrowed to 0600 at the next start.
	if err := os.Chmod(first.File, 0o644); err != nil {
		t.Fatal(err)
	}
	c = connectEmbedded(t, cfg, logger)
	if fi, err := os.Stat(first.File); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Fatalf("after restart %s has mode %v, want 0600", first.File, fi.Mode().Perm())
	}
	if strings.Contains(logs.String(), first.Password.Reveal()) || strings.Contains(logs.String(), own.Password.Reveal()) {
		t.Fatalf("log holds a password after the restart:\n%s", logs.String())
	}
	if got := c.AppCredential(); got != first {
		t.Fatalf("after restart app credential changed (file %s -> %s)", first.File, got.File)
	}
	app, err := nats.Connect(c.ClientURL(), first.Option())
	if err != nil {
		t.Fatalf("app with the first start's password: %v", err)
	}
	app.Close()
}

// Configured passwords (a file, an env var) are used as given; nothing is generated.
func TestConfiguredPasswords(t *testing.T) {
	cfg := embeddedCfg(t)
	dir := t.TempDir()
	appFile := filepath.Join(dir, "app")
	if err := os.WriteFile(appFile, []byte("app-secret-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RAGWATCH_TEST_NATS_PW", "own-secret-from-env")
	cfg.Embedded.Users.App = User{Name: "support-bot", PasswordFile: appFile}
	cfg.Embedded.Users.Ragwatch = User{Name: "rw", PasswordEnv: "RAGWATCH_TEST_NATS_PW"}
	c := connectEmbedded(t, cfg, nil)

	app, err := nats.Connect(c.ClientURL(), nats.UserInfo("support-bot", "app-secret-from-file"))
	if err != nil {
		t.Fatal(err)
	}
	app.Close()
	own, err := nats.Connect(c.ClientURL(), nats.UserInfo("rw", "own-secret-from-env"))
	if err != nil {
		t.Fatal(err)
	}
	own.Close()
	matches, _ := filepath.Glob(filepath.Join(cfg.StoreDir, "*.password"))
	if len(matches) != 0 {
		t.Fatalf("generated %v although passwords are configured", matches)
	}

	t.Setenv("RAGWATCH_TEST_NATS_PW", "")
	if _, err := Connect(context.Background(), cfg, prometheus.NewRegistry(), nil); err == nil ||
		!strings.Contains(err.Error(), "nats.embedded.users.ragwatch") {
		t.Fatalf("unset env var: err = %v, want one naming the key", err)
	}
}
