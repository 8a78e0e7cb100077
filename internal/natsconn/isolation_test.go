package natsconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// The reply trick: the app publishes an allowed record whose reply subject names ragwatch's
// state. A stream capturing the record answers with its publish acknowledgement on that reply,
// published by the server itself, so the app's publish permissions do not apply. With the app
// in ragwatch's account the acknowledgement overwrote the alert-state key, queued junk for the
// scorers, wrote a dead letter and a score. In its own account, behind service imports, the
// acknowledgement goes back into the app's account whatever the reply says: ragwatch's bucket,
// streams and scores stay untouched, the records are still stored, and the app's own inbox still
// gets its acknowledgement.
func TestAppReplyCannotReachRagwatchState(t *testing.T) {
	cfg := embeddedCfg(t)
	// ragwatch's own state, as config's defaults name it (scoring.queue, alerting.state_bucket).
	q := struct{ Stream, Subject, DeadLetterStream, DeadLetterSubject, ScoresSubjectPrefix string }{
		"RAGWATCH_SCORING", "ragwatch.scoring.records", "RAGWATCH_SCORING_DEAD", "ragwatch.scoring.dead", "ragwatch.scores"}
	const stateBucket = "ragwatch_alerts"
	scores := q.ScoresSubjectPrefix + ".support-bot"
	ctx := context.Background()

	c, err := Connect(ctx, cfg, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	ingest, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: cfg.Consume.Stream, Subjects: appSubjects(cfg.Subjects)})
	if err != nil {
		t.Fatal(err)
	}
	scoring, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: q.Stream, Subjects: []string{q.Subject}})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: q.DeadLetterStream, Subjects: []string{q.DeadLetterSubject}})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := c.KeyValue(ctx, stateBucket, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "slo.support-bot", []byte("state")); err != nil {
		t.Fatal(err)
	}
	scoresSub, err := c.NC.SubscribeSync(q.ScoresSubjectPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	inboxSub, err := c.NC.SubscribeSync("_INBOX.>") // ragwatch's own replies
	if err != nil {
		t.Fatal(err)
	}
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	app, err := nats.Connect(c.ClientURL(), c.AppCredential().Option())
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	replies := []string{
		"$KV." + stateBucket + ".slo.support-bot",
		q.Subject,
		q.DeadLetterSubject,
		scores,
		// The acknowledgement is JSON with a "seq": as a purge request it would empty the
		// scoring queue up to it.
		"$JS.API.STREAM.PURGE." + q.Stream,
		"_INBOX.ragwatch-reply",
	}
	for _, reply := range replies {
		m := &nats.Msg{Subject: "ragwatch.records.support-bot", Reply: reply, Data: []byte(`{"trace_id":"t1"}`)}
		if err := app.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	// The app's own publish with an acknowledgement, after the tricks: the stream stores in
	// order, so once it is acknowledged the tricks' acknowledgements have been sent.
	ajs, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := ajs.Publish(ctx, "ragwatch.records.support-bot", []byte(`{"trace_id":"t2"}`))
	if err != nil {
		t.Fatalf("the app's acknowledged publish: %v", err)
	}
	if want := uint64(len(replies) + 1); ack.Stream != cfg.Consume.Stream || ack.Sequence != want {
		t.Fatalf("ack = %+v, want stream %s sequence %d", ack, cfg.Consume.Stream, want)
	}
	// What the acknowledgements could still do they would have done by now; look for a while.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, sub := range []*nats.Subscription{scoresSub, inboxSub} {
			if m, err := sub.NextMsg(10 * time.Millisecond); err == nil {
				t.Errorf("the server published on %s: %s", m.Subject, m.Data)
			}
		}
	}

	// A drained sync subscription waits for its reader: end them before Close drains.
	for _, sub := range []*nats.Subscription{scoresSub, inboxSub} {
		if err := sub.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
	}

	e, err := kv.Get(ctx, "slo.support-bot")
	if err != nil || string(e.Value()) != "state" || e.Revision() != 1 {
		t.Errorf("alert state: %q, %v; want \"state\" at revision 1", value(e), err)
	}
	for _, s := range []jetstream.Stream{scoring, dead} {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 0 || info.State.LastSeq != 0 {
			t.Errorf("stream %s got %d messages (last seq %d) from the app's replies", info.Config.Name, info.State.Msgs, info.State.LastSeq)
		}
	}
	info, err := ingest.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(replies)+1) {
		t.Fatalf("intake stream holds %d records, want %d: a record with a reply must still be ingested", info.State.Msgs, len(replies)+1)
	}

	// The replies that would pass a service import unchanged are refused from clients.
	onErr, errs := asyncErrs()
	bad, err := nats.Connect(c.ClientURL(), c.AppCredential().Option(), onErr)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	for _, reply := range []string{"$JS.ACK." + q.Stream + ".workers.1.1.1.0.0", "_R_.abc.def"} {
		if err := bad.PublishMsg(&nats.Msg{Subject: "ragwatch.records.support-bot", Reply: reply, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		_ = bad.Flush()
		select {
		case err := <-errs:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), "Reply") {
				t.Fatalf("reply %s: err = %v, want a reply permissions violation", reply, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("reply %s: not refused", reply)
		}
	}

	// ragwatch's streams and buckets live in the global account, as before accounts: a restart
	// (and an upgrade from a single-account store) finds them.
	c.Close()
	c, err = Connect(ctx, cfg, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	kv, err = c.JS.KeyValue(ctx, stateBucket)
	if err != nil {
		t.Fatalf("alert-state bucket after a restart: %v", err)
	}
	if e, err := kv.Get(ctx, "slo.support-bot"); err != nil || string(e.Value()) != "state" {
		t.Fatalf("alert state after a restart: %q, %v", value(e), err)
	}
}

// The app's account holds nothing of ragwatch's: no JetStream, so neither its streams nor
// buckets; ragwatch exports the ingest subjects to it as services.
func TestAppAccountIsolated(t *testing.T) {
	cfg := embeddedCfg(t)
	c := connectEmbedded(t, cfg, nil)
	acc, err := c.server.LookupAccount(AppAccount)
	if err != nil {
		t.Fatal(err)
	}
	if acc.JetStreamEnabled() {
		t.Fatal("JetStream is enabled in the app's account")
	}
	if !c.server.GlobalAccount().JetStreamEnabled() {
		t.Fatal("JetStream is not enabled in ragwatch's account")
	}
	for _, subj := range appSubjects(cfg.Subjects) {
		if !c.server.GlobalAccount().IsExportService(subj) {
			t.Fatalf("%s is not exported to the app as a service", subj)
		}
		if d, err := c.server.GlobalAccount().ServiceExportResponseThreshold(subj); err != nil || d != 250*time.Millisecond {
			t.Fatalf("%s: response threshold %v, %v; want 250ms in core mode", subj, d, err)
		}
	}
}

// In core mode nothing answers the app's replies: the way back the server keeps for each
// (a response map) expires in 250ms, so a flood of reply-bearing records cannot pile them up
// (attack_test.go floods 200,000). In jetstream mode the stream answers, and the app waits
// for its acknowledgement up to its publish timeout.
func TestUnansweredAppRepliesExpire(t *testing.T) {
	cfg := embeddedCfg(t)
	c := connectEmbedded(t, cfg, nil)
	app, err := nats.Connect(c.ClientURL(), c.AppCredential().Option())
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	sub, err := c.NC.SubscribeSync("ragwatch.records.>")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		if err := app.PublishMsg(&nats.Msg{Subject: "ragwatch.records.x", Reply: fmt.Sprintf("_INBOX_app.%d", i), Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	acc := c.server.GlobalAccount()
	if acc.NumPendingAllResponses() == 0 {
		t.Fatal("no pending responses: the messages did not cross a service import")
	}
	testutil.Eventually(t, 2*time.Second, 10*time.Millisecond, "pending responses expired", func() bool {
		return acc.NumPendingAllResponses() == 0
	})

	cfg = embeddedCfg(t)
	cfg.Consume.Mode = ModeJetStream
	c = connectEmbedded(t, cfg, nil)
	if d, err := c.server.GlobalAccount().ServiceExportResponseThreshold(cfg.Subjects.Records); err != nil || d != 5*time.Second {
		t.Fatalf("jetstream mode: response threshold %v, %v; want 5s", d, err)
	}
}

func value(e jetstream.KeyValueEntry) string {
	if e == nil {
		return ""
	}
	return string(e.Value())
}

// Why a service import (serverAccounts): the reply trick against the three ways to let an app
// publish into ragwatch's intake stream. One account and a stream import both deliver the
// app's reply unchanged, so the stream's acknowledgement overwrites the KV key (and, with a
// stream import, the app no longer gets its acknowledgement at all); a service import rewrites
// the reply into the app's account: the key keeps its value and the app is acknowledged.
func TestReplyTrickByAccountDesign(t *testing.T) {
	for _, tt := range []struct {
		design      string
		overwritten bool // the KV key got the acknowledgement
		acked       bool // the app's own acknowledged publish came back
	}{
		{"one account", true, true},
		{"stream import", true, false},
		{"service import", false, true},
	} {
		t.Run(tt.design, func(t *testing.T) {
			opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true}
			g, appAcc := server.NewAccount(server.DEFAULT_GLOBAL_ACCOUNT), server.NewAccount(AppAccount)
			switch tt.design {
			case "one account":
				appAcc = nil
			case "stream import":
				if err := appAcc.AddStreamExport("ragwatch.records.>", []*server.Account{g}); err != nil {
					t.Fatal(err)
				}
				if err := g.AddStreamImport(appAcc, "ragwatch.records.>", ""); err != nil {
					t.Fatal(err)
				}
			case "service import":
				if err := g.AddServiceExport("ragwatch.records.>", []*server.Account{appAcc}); err != nil {
					t.Fatal(err)
				}
				if err := appAcc.AddServiceImport(g, "ragwatch.records.>", "ragwatch.records.>"); err != nil {
					t.Fatal(err)
				}
			}
			if appAcc != nil {
				opts.Accounts = []*server.Account{g, appAcc}
			}
			opts.Users = []*server.User{{Username: "rw", Password: "rw"}, {Username: "app", Password: "app", Account: appAcc}}
			s, err := server.NewServer(opts)
			if err != nil {
				t.Fatal(err)
			}
			s.Start()
			defer func() { s.Shutdown(); s.WaitForShutdown() }()
			if !s.ReadyForConnections(10 * time.Second) {
				t.Fatal("not ready")
			}
			if appAcc != nil {
				if err := s.GlobalAccount().EnableJetStream(nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			rw, err := nats.Connect(s.ClientURL(), nats.UserInfo("rw", "rw"))
			if err != nil {
				t.Fatal(err)
			}
			defer rw.Close()
			js, err := jetstream.New(rw)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"ragwatch.records.>"}}); err != nil {
				t.Fatal(err)
			}
			kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_alerts"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(ctx, "k", []byte("state")); err != nil {
				t.Fatal(err)
			}
			app, err := nats.Connect(s.ClientURL(), nats.UserInfo("app", "app"))
			if err != nil {
				t.Fatal(err)
			}
			defer app.Close()
			if err := app.PublishMsg(&nats.Msg{Subject: "ragwatch.records.x", Reply: "$KV.ragwatch_alerts.k", Data: []byte("{}")}); err != nil {
				t.Fatal(err)
			}
			ajs, err := jetstream.New(app)
			if err != nil {
				t.Fatal(err)
			}
			actx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err = ajs.Publish(actx, "ragwatch.records.x", []byte("{}"))
			if acked := err == nil; acked != tt.acked {
				t.Errorf("app acknowledged = %v (%v), want %v", acked, err, tt.acked)
			}
			// Both messages are stored either way; then the first acknowledgement has been sent.
			testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, "both stored", func() bool {
				st, err := js.Stream(ctx, "INGEST")
				if err != nil {
					return false
				}
				info, err := st.Info(ctx)
				return err == nil && info.State.Msgs == 2
			})
			value := func() string {
				e, err := kv.Get(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				return string(e.Value())
			}
			if tt.overwritten {
				testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, "the acknowledgement in the key", func() bool {
					return value() == `{"stream":"INGEST","seq":1}`
				})
				return
			}
			time.Sleep(200 * time.Millisecond) // the acknowledgement's way into the bucket, were it open
			if v := value(); v != "state" {
				t.Errorf("key = %q, want \"state\"", v)
			}
		})
	}
}
