package natsin

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// On an external cluster ragwatch cannot set the accounts up itself; it can see when a
// publisher shares its account: a service import from an account of the app's own replaces the
// reply with a one-time _R_ subject, any other reply is the publisher's own, in ragwatch's
// account. Each such message is counted, and warned about once per 10 minutes, in core mode
// (every message) and in jetstream mode (a probe of the first messages per subject, since the
// stream's copy does not keep the reply). Messages without a reply tell nothing and count
// nothing; through the embedded server the app's replies are service replies.
func TestSharedAccountRepliesDetected(t *testing.T) {
	for _, mode := range []string{config.NATSModeCore, config.NATSModeJetStream} {
		t.Run("external "+mode, func(t *testing.T) {
			ns := testutil.RunJetStream(t) // one account: the app publishes in ragwatch's
			cfg := config.Default().NATS
			cfg.URL = config.SecretURL(ns.ClientURL())
			cfg.Consume.Mode = mode
			own, _ := testutil.Connect(t, ns)
			app, ajs := testutil.Connect(t, ns)

			var logs testutil.Buffer
			clock := testutil.NewClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
			sink := &countingSink{counts: map[string]int{}}
			reg := prometheus.NewRegistry()
			ojs, err := jetstream.New(own)
			if err != nil {
				t.Fatal(err)
			}
			sub, err := New(Settings{NC: own, JS: ojs, Config: cfg, Records: sink, Metrics: ingest.NewMetrics(reg), Registerer: reg,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Shutdown(context.Background()) }()

			record := func(i int) []byte {
				return fmt.Appendf(nil, `{"trace_id":"trace-%04d","service":"support-bot","query":"q"}`, i)
			}
			publish := func(i int, reply string) {
				t.Helper()
				if mode == config.NATSModeJetStream && reply != "" {
					// The app's own acknowledged publish: its inbox is in ragwatch's account.
					if _, err := ajs.Publish(context.Background(), "ragwatch.records.support-bot", record(i)); err != nil {
						t.Fatal(err)
					}
					return
				}
				if err := app.PublishMsg(&nats.Msg{Subject: "ragwatch.records.support-bot", Reply: reply, Data: record(i)}); err != nil {
					t.Fatal(err)
				}
				if err := app.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			shared := func() float64 { return testutil.Sum(t, reg, "ragwatch_nats_shared_account_replies_total", nil) }

			publish(1, "") // no reply: nothing to tell
			publish(2, "_INBOX.app-inbox")
			publish(3, "_INBOX.app-inbox")
			testutil.Eventually(t, patience, 5*time.Millisecond, "three records", func() bool { _, n := sink.snapshot(); return n == 3 })
			testutil.Eventually(t, patience, 5*time.Millisecond, "two shared replies", func() bool { return shared() == 2 })
			if n := strings.Count(logs.String(), "reply subject in ragwatch's own account"); n != 1 {
				t.Fatalf("warned %d times, want once:\n%s", n, logs.String())
			}
			if strings.Contains(logs.String(), "app-inbox") {
				t.Fatalf("the warning quotes the reply:\n%s", logs.String())
			}
			clock.Add(10 * time.Minute)
			publish(4, "_INBOX.app-inbox")
			testutil.Eventually(t, patience, 5*time.Millisecond, "three shared replies", func() bool { return shared() == 3 })
			if n := strings.Count(logs.String(), "reply subject in ragwatch's own account"); n != 2 {
				t.Fatalf("after 10 minutes warned %d times in all, want twice:\n%s", n, logs.String())
			}
		})
	}

	for _, mode := range []string{config.NATSModeCore, config.NATSModeJetStream} {
		t.Run("embedded "+mode, func(t *testing.T) {
			conn, app, cfg := embedded(t)
			cfg.Consume.Mode = mode
			sink := &countingSink{counts: map[string]int{}}
			reg := prometheus.NewRegistry()
			sub, err := New(Settings{NC: conn.NC, JS: conn.JS, Config: cfg, Records: sink, Metrics: ingest.NewMetrics(reg), Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Shutdown(context.Background()) }()
			for i, reply := range []string{"_INBOX_app.x", "$KV.ragwatch_alerts.k", ""} {
				if err := app.PublishMsg(&nats.Msg{Subject: "ragwatch.records.support-bot", Reply: reply,
					Data: fmt.Appendf(nil, `{"trace_id":"trace-%04d","service":"support-bot","query":"q"}`, i)}); err != nil {
					t.Fatal(err)
				}
			}
			testutil.Eventually(t, patience, 5*time.Millisecond, "three records", func() bool { _, n := sink.snapshot(); return n == 3 })
			if n := testutil.Sum(t, reg, "ragwatch_nats_shared_account_replies_total", nil); n != 0 {
				t.Fatalf("ragwatch_nats_shared_account_replies_total = %v through the embedded server, want 0", n)
			}
		})
	}
}

func TestServiceReply(t *testing.T) {
	for reply, want := range map[string]bool{
		"_R_.abc.def":                   true,
		"_GR_.aaaaaa.bbbbbb._R_.abc":    true,
		"_INBOX.abc":                    false,
		"_GR_.aaaaaa.bbbbbb._INBOX.abc": false,
		"$KV.ragwatch_alerts.k":         false,
		"x._R_.abc":                     false,
		"_GR_._R_.x":                    false,
	} {
		if got := serviceReply(reply); got != want {
			t.Errorf("serviceReply(%q) = %v, want %v", reply, got, want)
		}
	}
}

// The jetstream probe is a plain subscription: a ragwatch user allowed the JetStream API but
// not the ingest subjects themselves gets it refused by the server, and consumes as before.
func TestReplyProbeRefusedStillConsumes(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true,
		Users: []*server.User{
			{Username: "rw", Password: "rw", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{"$JS.API.>", "$JS.ACK.>"}},
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
			}},
			{Username: "app", Password: "app"},
		}}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("not ready")
	}
	cfg := config.Default().NATS
	cfg.URL = config.SecretURL(ns.ClientURL())
	cfg.Consume.Mode = config.NATSModeJetStream
	var asyncErrs atomic.Int32
	own, err := nats.Connect(ns.ClientURL(), nats.UserInfo("rw", "rw"),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) { asyncErrs.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	ojs, err := jetstream.New(own)
	if err != nil {
		t.Fatal(err)
	}
	sink := &countingSink{counts: map[string]int{}}
	reg := prometheus.NewRegistry()
	sub, err := New(Settings{NC: own, JS: ojs, Config: cfg, Records: sink, Metrics: ingest.NewMetrics(reg), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(context.Background()); err != nil {
		t.Fatalf("start with the probe refused: %v", err)
	}
	defer func() { _ = sub.Shutdown(context.Background()) }()
	_, ajs := testutil.Connect(t, ns, nats.UserInfo("app", "app"))
	for i := range 3 {
		if _, err := ajs.Publish(context.Background(), "ragwatch.records.support-bot",
			fmt.Appendf(nil, `{"trace_id":"trace-%04d","service":"support-bot","query":"q"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, patience, 5*time.Millisecond, "three records", func() bool { _, n := sink.snapshot(); return n == 3 })
	testutil.Eventually(t, patience, 5*time.Millisecond, "the refused probes reported", func() bool { return asyncErrs.Load() >= 1 })
	if !own.IsConnected() {
		t.Fatal("the refused probe closed the connection")
	}
}
