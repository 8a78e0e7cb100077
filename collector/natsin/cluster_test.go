package natsin

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/natsconn"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// documentedClusterConf is the nats-server configuration docs/nats.md gives for an external
// cluster: its first ```conf block.
func documentedClusterConf(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../docs/nats.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "```conf\n")
	if !ok {
		t.Fatal("docs/nats.md has no ```conf block")
	}
	conf, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatal("docs/nats.md: the ```conf block is not closed")
	}
	return conf
}

// The accounts docs/nats.md tells an operator to configure hold against the reply trick: on a
// server started with that block, ragwatch consumes from its JetStream intake as a sidecar on an
// external cluster does; the application publishes allowed records whose replies name
// ragwatch's alert-state key and a scores subject. Neither is written, the records are ingested,
// the app's acknowledged publish works with its own inbox, and ragwatch sees no reply from its
// own account.
func TestDocumentedClusterAccounts(t *testing.T) {
	t.Setenv("RAGWATCH_NATS_PASSWORD", "ragwatch-cluster-pw")
	t.Setenv("SUPPORT_BOT_NATS_PASSWORD", "support-bot-cluster-pw")
	opts := &server.Options{}
	if err := opts.ProcessConfigString(documentedClusterConf(t)); err != nil {
		t.Fatalf("the documented configuration does not load: %v", err)
	}
	opts.Host, opts.Port, opts.StoreDir, opts.NoSigs = "127.0.0.1", -1, t.TempDir(), true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}

	cfg := config.Default().NATS
	cfg.URL = config.SecretURL(ns.ClientURL())
	cfg.User, cfg.PasswordEnv = "ragwatch-worker", "RAGWATCH_NATS_PASSWORD"
	cfg.Consume.Mode = config.NATSModeJetStream
	ctx := context.Background()
	conn, err := natsconn.Connect(ctx, cfg, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	kv, err := conn.KeyValue(ctx, config.Default().Alerting.StateBucket, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(ctx, "slo.support-bot", []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	scoresPrefix := config.Default().Scoring.Queue.ScoresSubjectPrefix
	scores, err := conn.NC.SubscribeSync(scoresPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = scores.Unsubscribe() }()

	sink := &countingSink{counts: map[string]int{}}
	reg := prometheus.NewRegistry()
	sub, err := New(Settings{NC: conn.NC, JS: conn.JS, Config: cfg, Records: sink, Metrics: ingest.NewMetrics(reg), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Shutdown(context.Background()) }()

	app, err := nats.Connect(ns.ClientURL(), nats.UserInfo("support-bot", "support-bot-cluster-pw"), nats.CustomInboxPrefix("_INBOX_support-bot"))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	record := func(i int) []byte {
		return fmt.Appendf(nil, `{"trace_id":"trace-%04d","service":"support-bot","query":"q"}`, i)
	}
	for i, reply := range []string{"$KV." + config.Default().Alerting.StateBucket + ".slo.support-bot", scoresPrefix + ".support-bot"} {
		if err := app.PublishMsg(&nats.Msg{Subject: "ragwatch.records.support-bot", Reply: reply, Data: record(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ajs, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := ajs.Publish(ctx, "ragwatch.records.support-bot", record(2)); err != nil || ack.Stream != cfg.Consume.Stream {
		t.Fatalf("the app's acknowledged publish: %+v, %v", ack, err)
	}
	testutil.Eventually(t, patience, 5*time.Millisecond, "three records", func() bool { _, n := sink.snapshot(); return n == 3 })
	if m, err := scores.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("the server published on %s: %s", m.Subject, m.Data)
	}
	if e, err := kv.Get(ctx, "slo.support-bot"); err != nil {
		t.Errorf("alert state: %v", err)
	} else if string(e.Value()) != "state" || e.Revision() != rev {
		t.Errorf("alert state = %q at revision %d; want \"state\" at revision %d", e.Value(), e.Revision(), rev)
	}
	if n := testutil.Sum(t, reg, "ragwatch_nats_shared_account_replies_total", nil); n != 0 {
		t.Errorf("ragwatch_nats_shared_account_replies_total = %v with the documented accounts, want 0", n)
	}
}
