package service_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// The reply trick against the running app, with its own consumers: records consumed from the
// JetStream intake stream, the alert-state bucket, the scoring queue, its dead letters and the
// scores subscription. The app publishes allowed records whose reply subjects name those; the
// stream's publish acknowledgement must land in none of them (before accounts it overwrote the
// alert-state key, queued junk for the scorers, wrote a dead letter and a forged score), and
// the records themselves must still be ingested.
func TestNATSAppReplyCannotWriteRagwatchState(t *testing.T) {
	cfg := testConfig(t)
	cfg.NATS.Consume.Mode = config.NATSModeJetStream
	cfg.Scoring.Workers = 0 // nothing takes work off the scoring queue: what lands there stays
	e := startEnv(t, cfg)
	ctx := context.Background()
	js, q := e.app.NATS.JS, cfg.Scoring.Queue

	kv, err := js.KeyValue(ctx, cfg.Alerting.StateBucket)
	if err != nil {
		t.Fatalf("alert-state bucket %s: %v", cfg.Alerting.StateBucket, err)
	}
	rev, err := kv.Put(ctx, "slo.support-bot", []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	scores, err := e.app.NATS.NC.SubscribeSync(q.ScoresSubjectPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = scores.Unsubscribe() }() // a drained sync subscription would wait for its reader
	if err := e.app.NATS.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	app, err := nats.Connect(e.app.NATS.ClientURL(), e.app.NATS.AppCredential().Option())
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	replies := []string{
		"$KV." + cfg.Alerting.StateBucket + ".slo.support-bot",
		q.Subject,
		q.DeadLetterSubject,
		q.ScoresSubjectPrefix + ".support-bot",
	}
	for i, reply := range replies {
		data := fmt.Sprintf(`{"trace_id":"%032x","service":"support-bot","query":"q","answer":"a"}`, i+1)
		if err := app.PublishMsg(&nats.Msg{Subject: "ragwatch.records.support-bot", Reply: reply, Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
	}
	// The app's own acknowledged publish, after the tricks, still works: the stream stores in
	// order, so by its acknowledgement theirs were sent.
	ajs, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf("%032x", len(replies)+1)
	ack, err := ajs.Publish(ctx, "ragwatch.records.support-bot", []byte(`{"trace_id":"`+last+`","service":"support-bot","query":"q","answer":"a"}`))
	if err != nil || ack.Stream != cfg.NATS.Consume.Stream {
		t.Fatalf("the app's acknowledged publish: %+v, %v", ack, err)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "every record ingested", func() bool {
		return e.sink.len() == len(replies)+1
	})
	for i := range replies {
		if e.sink.get(fmt.Sprintf("%032x", i+1)) == nil {
			t.Errorf("record %d (reply %s) was not ingested", i+1, replies[i])
		}
	}

	pubAck := []byte(`"stream":"` + cfg.NATS.Consume.Stream + `"`)
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if m, err := scores.NextMsg(20 * time.Millisecond); err == nil {
			t.Errorf("a score reached %s: %s", m.Subject, m.Data)
		}
	}
	if ent, err := kv.Get(ctx, "slo.support-bot"); err != nil || string(ent.Value()) != "state" || ent.Revision() != rev {
		val := ""
		if ent != nil {
			val = string(ent.Value())
		}
		t.Errorf("alert state = %q, %v; want \"state\" at revision %d", val, err, rev)
	}
	for _, name := range []string{q.Stream, q.DeadLetterStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
			if m, err := s.GetMsg(ctx, seq); err == nil && bytes.Contains(m.Data, pubAck) {
				t.Errorf("stream %s holds the app's acknowledgement at %d: %s", name, seq, m.Data)
			}
		}
		if name == q.DeadLetterStream && info.State.Msgs != 0 {
			t.Errorf("dead-letter stream holds %d messages, want none", info.State.Msgs)
		}
	}
	if n := testutil.Sum(t, e.app.Registry, "ragwatch_scores_invalid_total", nil); n != 0 {
		t.Errorf("ragwatch_scores_invalid_total = %v: something reached the scores subject", n)
	}
}
