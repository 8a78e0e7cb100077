package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestSetupIsIdempotentAndConfiguresTheQueue(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	ctx := context.Background()
	cfg := testQueueConfig()
	cfg.MaxDeliver = 3
	for i := 0; i < 2; i++ {
		if _, err := Setup(ctx, js, cfg, 1); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := js.Stream(ctx, cfg.Stream)
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := info.Config
	if c.Retention != jetstream.WorkQueuePolicy || c.Storage != jetstream.FileStorage || c.Discard != jetstream.DiscardNew ||
		c.MaxBytes != cfg.MaxBytes || c.MaxAge != cfg.MaxAge || c.Duplicates != cfg.DedupWindow || c.Subjects[0] != "ragwatch.scoring.records" {
		t.Fatalf("stream config %+v", c)
	}
	cons, err := js.Consumer(ctx, cfg.Stream, cfg.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	ci := cons.CachedInfo().Config
	if ci.AckPolicy != jetstream.AckExplicitPolicy || ci.AckWait != 2*time.Second || ci.MaxDeliver != 4 {
		t.Fatalf("consumer config %+v", ci)
	}
	dl, err := js.Stream(ctx, cfg.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	if dl.CachedInfo().Config.Subjects[0] != "ragwatch.scoring.dead" {
		t.Fatalf("dead-letter stream %+v", dl.CachedInfo().Config)
	}
}

func TestPublisherQueuesOnceByKey(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	ctx := context.Background()
	cfg := testQueueConfig()
	cfg.BatchRecords = 1 // the server's dedup by record key (a batch's id is its first record's)
	if _, err := Setup(ctx, js, cfg, 1); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p := NewPublisher(js, cfg, 100, reg, nil)
	p.DepthInterval = 10 * time.Millisecond
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		for dup := 0; dup < 3; dup++ { // the same record offered three times
			r := &record.Record{TraceID: fmt.Sprintf("%032x", i), Query: "q", Sampling: &record.Sampling{Probability: 0.5, Reason: "rate"}}
			if err := p.Offer(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js, cfg.Stream); n != 10 {
		t.Fatalf("stream holds %d records, want 10", n)
	}
	// The stored form is the record in the binary form, with its Sampling.
	st, _ := js.Stream(ctx, cfg.Stream)
	m, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got record.Record
	if !IsBinaryRecord(m.Data) {
		t.Fatalf("stored %.40q, not the binary form", m.Data)
	}
	if err := DecodeRecord(m.Data, &got); err != nil {
		t.Fatal(err)
	}
	if got.TraceID != fmt.Sprintf("%032x", 0) || got.Sampling == nil || got.Sampling.Probability != 0.5 || m.Header.Get(jetstream.MsgIDHeader) != got.TraceID {
		t.Fatalf("stored %+v header %v", got, m.Header)
	}
	if d := promtestutil.ToFloat64(p.m.Dropped.WithLabelValues(DropQueueFull)) + promtestutil.ToFloat64(p.m.Dropped.WithLabelValues(DropNATSUnavailable)); d != 0 {
		t.Fatalf("%v drops", d)
	}
	// Offer after Shutdown is refused and counted, and Shutdown again is fine.
	if err := p.Offer(&record.Record{TraceID: "x"}); err != ErrClosed {
		t.Fatalf("offer after shutdown: %v", err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// A record offered again within scoring.queue.dedup_window is not queued again; after the
// window it is (the server forgets the key), which is why the window must outlast every way a
// record can come back (docs/sampling.md).
func TestPublisherDedupWindow(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	ctx := context.Background()
	cfg := testQueueConfig()
	cfg.DedupWindow = time.Second
	cfg.BatchRecords = 1
	if _, err := Setup(ctx, js, cfg, 1); err != nil {
		t.Fatal(err)
	}
	p := NewPublisher(js, cfg, 10, prometheus.NewRegistry(), nil)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(ctx) }()
	r := &record.Record{TraceID: fmt.Sprintf("%032x", 7), Query: "q", Sampling: &record.Sampling{Probability: 0.1, Reason: "rate"}}
	if err := p.Offer(r); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the first copy", func() bool { return streamMsgs(t, js, cfg.Stream) == 1 })
	first := time.Now()
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "a copy offered after the window", func() bool {
		if err := p.Offer(r); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		return streamMsgs(t, js, cfg.Stream) == 2
	})
	if d := time.Since(first); d < 900*time.Millisecond {
		t.Fatalf("queued again %v after the first copy, inside the 1s window", d)
	}
}

// Many records of varied sizes published asynchronously, up to the publisher's outstanding-ack
// bound: every stored record must be whole and stored once, a record alone in its message under
// its own Nats-Msg-Id and a batch under its first record's (a buffer shared or reused before its
// ack would store one record's bytes under another's id, or a mix). Batches are on (the
// default): at most batch_records records and the server's max payload a message.
func TestPublisherStoresEachRecordIntact(t *testing.T) {
	for _, batch := range []int{1, 32} {
		t.Run(fmt.Sprintf("batch_records=%d", batch), func(t *testing.T) {
			s := testutil.RunJetStream(t)
			nc, js := testutil.Connect(t, s)
			ctx := context.Background()
			cfg := testQueueConfig()
			cfg.BatchRecords = batch
			if _, err := Setup(ctx, js, cfg, 1); err != nil {
				t.Fatal(err)
			}
			const n = 3000
			reg := prometheus.NewRegistry()
			p := NewPublisher(js, cfg, n, reg, nil)
			content := func(i int) string { return strings.Repeat(fmt.Sprintf("doc of record %d. ", i), 1+i%300) }
			recs := make([]*record.Record, n)
			for i := range recs {
				recs[i] = &record.Record{TraceID: fmt.Sprintf("%032x", i), Query: "q", Documents: []record.Document{{ID: "d", Content: content(i)}},
					Sampling: &record.Sampling{Probability: 0.1, Reason: "rate"}}
			}
			publishBuffered(t, p, recs)
			msgs := storedMsgs(t, js, cfg.Stream)
			seen := map[string]bool{}
			batches := 0
			for seq, m := range msgs {
				entries := m.entries
				if m.batch {
					batches++
					if len(entries) < 2 || len(entries) > batch || int64(len(m.Data)) > nc.MaxPayload() {
						t.Fatalf("message %d: a batch of %d records, %d bytes; want 2 to %d records within %d bytes", seq, len(entries), len(m.Data), batch, nc.MaxPayload())
					}
				}
				for k, e := range entries {
					var got record.Record
					if err := DecodeRecord(e, &got); err != nil || !IsBinaryRecord(e) {
						t.Fatalf("message %d, record %d: %v (binary form %v)", seq, k, err, IsBinaryRecord(e))
					}
					wantID := got.TraceID
					if len(entries) > 1 && k == 0 {
						wantID = fmt.Sprintf("batch:%s:%d", got.TraceID, len(entries))
					}
					var i int
					if _, err := fmt.Sscanf(got.TraceID, "%x", &i); err != nil || (k == 0 && m.Header.Get(jetstream.MsgIDHeader) != wantID) ||
						len(got.Documents) != 1 || got.Documents[0].Content != content(i) || seen[got.TraceID] {
						t.Fatalf("message %d, record %d: record %s under id %q, content intact %v, seen before %v", seq, k, got.TraceID,
							m.Header.Get(jetstream.MsgIDHeader), len(got.Documents) == 1 && got.Documents[0].Content == content(i), seen[got.TraceID])
					}
					seen[got.TraceID] = true
				}
			}
			if len(seen) != n {
				t.Fatalf("%d records stored in %d messages, want %d", len(seen), len(msgs), n)
			}
			// With one record a message there is no batch; with 32, the 3,000 buffered records
			// go in full batches (the larger records' up to the max payload).
			if (batch == 1) != (batches == 0) || (batch > 1 && len(msgs) > n/batch*3) {
				t.Fatalf("batch_records %d: %d messages, %d of them batches", batch, len(msgs), batches)
			}
			h := testutil.Series(t, reg, "ragwatch_scoring_queue_message_records", nil).GetHistogram()
			if h.GetSampleCount() != uint64(len(msgs)) || h.GetSampleSum() != n {
				t.Fatalf("records per message histogram: %d messages, %v records; want %d, %d", h.GetSampleCount(), h.GetSampleSum(), len(msgs), n)
			}
		})
	}
}

func TestPublisherDropsWhenBufferOrStreamFull(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	ctx := context.Background()
	cfg := testQueueConfig()
	cfg.MaxBytes = 4096 // a handful of records
	if _, err := Setup(ctx, js, cfg, 1); err != nil {
		t.Fatal(err)
	}
	cfg.BatchRecords = 1 // each refusal is one record's (a batch's: below)
	reg := prometheus.NewRegistry()
	// Not started: the buffer of 2 fills and further offers are dropped at once.
	p := NewPublisher(js, cfg, 2, reg, nil)
	for i := 0; i < 5; i++ {
		err := p.Offer(&record.Record{TraceID: fmt.Sprint(i)})
		if (i < 2) != (err == nil) {
			t.Fatalf("offer %d: %v", i, err)
		}
	}
	if got := promtestutil.ToFloat64(p.m.Dropped.WithLabelValues(DropQueueFull)); got != 3 {
		t.Fatalf("queue_full drops = %v, want 3", got)
	}
	if err := p.Shutdown(ctx); err != nil { // shutdown without start
		t.Fatal(err)
	}

	// Started: the stream refuses records past max_bytes (discard new) and each refusal counts
	// as storage_full; the gauge says so until a record is accepted again.
	p2 := NewPublisher(js, cfg, 100, reg, nil)
	if err := p2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1000)
	for i := 0; i < 20; i++ {
		if err := p2.Offer(&record.Record{TraceID: fmt.Sprintf("big-%d", i), Query: big}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	stored := streamMsgs(t, js, cfg.Stream)
	full := promtestutil.ToFloat64(p2.m.Dropped.WithLabelValues(DropStorageFull))
	if stored == 0 || stored >= 20 || float64(stored)+full != 20 {
		t.Fatalf("stored %d + refused %v, want 20 in all with some refused", stored, full)
	}
	if q := promtestutil.ToFloat64(p2.m.Dropped.WithLabelValues(DropQueueFull)); q != 3 {
		t.Fatalf("queue_full drops = %v, want the 3 of the buffer only", q)
	}
	if !p2.StorageFull() || promtestutil.ToFloat64(p2.m.StorageFull) != 1 {
		t.Fatalf("storage full = %v, gauge %v; want true, 1", p2.StorageFull(), promtestutil.ToFloat64(p2.m.StorageFull))
	}

	// Room again (workers took the records): the next record is accepted and the gauge clears.
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	p3 := NewPublisher(js, cfg, 100, reg, nil)
	p3.storageFull.Store(true) // as p2 left it; one process has one publisher
	if err := p3.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p3.Offer(&record.Record{TraceID: "after-purge"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, "storage full to clear", func() bool { return !p3.StorageFull() })
	if err := p3.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if g := promtestutil.ToFloat64(p3.m.StorageFull); g != 0 {
		t.Fatalf("storage full gauge = %v after a record was accepted, want 0", g)
	}
}

func TestSubjectToken(t *testing.T) {
	tests := map[string]string{
		"":                       "unknown",
		"checkout":               "checkout",
		"checkout.api":           "checkout_api",
		"a b*c>d":                "a_b_c_d",
		"Svc-1_x":                "Svc-1_x",
		"ünï":                    "__n__",
		strings.Repeat("a", 200): strings.Repeat("a", 128),
	}
	for in, want := range tests {
		if got := SubjectToken(in); got != want {
			t.Errorf("SubjectToken(%q) = %q, want %q", in, got, want)
		}
	}
	if got := ScoresSubject("ragwatch.scores", "chat.v2"); got != "ragwatch.scores.chat_v2" {
		t.Fatal(got)
	}
}

func TestScoresRoundTrip(t *testing.T) {
	s := testutil.RunJetStream(t)
	nc, _ := testutil.Connect(t, s)
	reg := prometheus.NewRegistry()
	sink := subscribeSink(t, nc, ScoreChecks{MaxWeight: func() float64 { return 4 }}, reg)
	raw, err := nc.SubscribeSync("ragwatch.scores.>")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := []score.Result{
		{TraceID: "t1", Service: "chat.v2", Metric: "faithfulness", Value: 0.75, Weight: 4, Scorer: "builtin", Time: now},
		{TraceID: "t2", Service: "", Metric: "answer_relevancy", Value: 1, Weight: 1, Scorer: "judge", Model: "m", InputTokens: 10, OutputTokens: 2, CostUSD: 0.001, Time: now},
	}
	if err := NewScorePublisher(nc, "").ConsumeScores(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	// Invalid messages are counted, not passed on.
	for _, bad := range []string{`{`, `{"trace_id":"t3","metric":"m","value":1.5}`, `{"metric":"m","value":0.5}`} {
		if err := nc.Publish("ragwatch.scores.chat", []byte(bad)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(reg)
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "results and invalid counts", func() bool {
		return len(sink.results()) == 2 && promtestutil.ToFloat64(m.InvalidScores) == 3
	})
	got := sink.results()
	for i := range in {
		if got[i] != in[i] {
			t.Errorf("result %d:\n got %+v\nwant %+v", i, got[i], in[i])
		}
	}
	for _, want := range []string{"ragwatch.scores.chat_v2", "ragwatch.scores.unknown"} {
		msg, err := raw.NextMsg(time.Second)
		if err != nil || msg.Subject != want {
			t.Fatalf("subject %v (%v), want %s", msg, err, want)
		}
	}
}

// A record's results travel as one message, a JSON array, and reach the consumer in one call
// in their order; a single result is still a bare object. Results of several services are
// grouped by subject.
func TestScoresOneMessagePerRecord(t *testing.T) {
	s := testutil.RunJetStream(t)
	nc, _ := testutil.Connect(t, s)
	sink := subscribeSink(t, nc, ScoreChecks{MaxWeight: func() float64 { return 20 }}, prometheus.NewRegistry())
	raw, err := nc.SubscribeSync("ragwatch.scores.>")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var rec []score.Result
	for i, m := range []string{score.Faithfulness, score.AnswerRelevancy, score.ContextPrecision,
		score.ContextRecall, score.CitationPrecision, score.CitationRecall} {
		rec = append(rec, score.Result{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Service: "checkout",
			Metric: m, Value: float64(i) / 8, Weight: 20, Scorer: "builtin", Time: now, Turn: 2})
	}
	single := []score.Result{{TraceID: "t-single", Service: "checkout", Metric: score.AnswerRelevancy, Value: 1, Weight: 1, Scorer: "judge", Model: "m", CostUSD: 0.001, Time: now}}
	mixed := []score.Result{
		{TraceID: "t-a", Service: "a.v1", Metric: score.MRR, Value: 0.5, Time: now},
		{TraceID: "t-b", Service: "b", Metric: score.MRR, Value: 0.25, Time: now},
		{TraceID: "t-a", Service: "a_v1", Metric: "ndcg@10", Value: 0.75, Time: now}, // same subject as a.v1
	}
	pub := NewScorePublisher(nc, "")
	for _, rs := range [][]score.Result{rec, single, mixed, nil} {
		if err := pub.ConsumeScores(context.Background(), rs); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	wantMsgs := []struct {
		subject string
		results []score.Result
	}{
		{"ragwatch.scores.checkout", rec},
		{"ragwatch.scores.checkout", single},
		{"ragwatch.scores.a_v1", []score.Result{mixed[0], mixed[2]}},
		{"ragwatch.scores.b", mixed[1:2]},
	}
	for i, w := range wantMsgs {
		msg, err := raw.NextMsg(time.Second)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		var got []score.Result
		if len(w.results) == 1 {
			// One result is a bare object, as one-result publishers have always sent.
			var r score.Result
			if msg.Data[0] != '{' {
				t.Fatalf("message %d is %s, want an object", i, msg.Data)
			}
			err = json.Unmarshal(msg.Data, &r)
			got = []score.Result{r}
		} else {
			if msg.Data[0] != '[' {
				t.Fatalf("message %d is %s, want an array", i, msg.Data)
			}
			err = json.Unmarshal(msg.Data, &got)
		}
		if err != nil || msg.Subject != w.subject || !slices.Equal(got, w.results) {
			t.Fatalf("message %d on %s (%v):\n got %+v\nwant %+v on %s", i, msg.Subject, err, got, w.results, w.subject)
		}
	}
	if msg, err := raw.NextMsg(50 * time.Millisecond); err == nil {
		t.Fatalf("unexpected message %s on %s", msg.Data, msg.Subject)
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the consumer calls", func() bool {
		return len(sink.received()) == len(wantMsgs)
	})
	calls := sink.received()
	for i, w := range wantMsgs {
		if !slices.Equal(calls[i], w.results) {
			t.Errorf("call %d:\n got %+v\nwant %+v", i, calls[i], w.results)
		}
	}
}

// More results than MaxScoresPerMessage, or more bytes than the server's max payload, are
// split into messages the subscribers accept; every result arrives once, in order.
func TestScorePublisherSplitsLargeGroups(t *testing.T) {
	s := testutil.RunServer(t, func(o *server.Options) { o.MaxPayload = 16 << 10 })
	nc, _ := testutil.Connect(t, s)
	reg := prometheus.NewRegistry()
	sink := subscribeSink(t, nc, ScoreChecks{}, reg)
	raw, err := nc.SubscribeSync("ragwatch.scores.>")
	if err != nil {
		t.Fatal(err)
	}
	const n = 2*MaxScoresPerMessage + 10
	in := make([]score.Result, n)
	for i := range in {
		in[i] = score.Result{TraceID: fmt.Sprintf("t-%d", i), Service: "s", Metric: score.Faithfulness, Value: 0.5}
	}
	in[3].Explanation = strings.Repeat("x", 10<<10) // 10 KiB: the first group must split for it
	if err := NewScorePublisher(nc, "").ConsumeScores(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "every result", func() bool {
		return len(sink.results()) == n
	})
	if !slices.Equal(sink.results(), in) {
		t.Fatal("results arrived changed or out of order")
	}
	if c := promtestutil.ToFloat64(NewMetrics(reg).InvalidScores); c != 0 {
		t.Fatalf("%v messages rejected", c)
	}
	msgs, _, err := raw.Pending()
	if err != nil {
		t.Fatal(err)
	}
	// A result here is about 125 bytes, so 16 KiB holds 128 of them: the first group of 256
	// splits into 128 + 128, the first half (with 10 KiB more) into 64 + 64 and again into
	// 32 + 32: four messages; the second group into two; the last 10 make one.
	if msgs != 7 {
		t.Fatalf("%d messages, want 7", msgs)
	}
	for range msgs {
		m, err := raw.NextMsg(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > 16<<10 {
			t.Fatalf("a message of %d bytes", len(m.Data))
		}
	}
}

// Under a sustained overload the stream is full, then has room for one record each time a
// worker takes one: the gauge follows every change, the warning is logged at most once a
// minute.
func TestStorageFullWarningIsBounded(t *testing.T) {
	var logs bytes.Buffer
	p := &Publisher{m: NewMetrics(prometheus.NewRegistry()), logger: slog.New(slog.NewTextHandler(&logs, nil)),
		cfg: config.ScoringQueue{Stream: "S", MaxBytes: 1 << 20}}
	warnings := func() int { return strings.Count(logs.String(), "JetStream storage full") }
	for range 100 {
		p.setStorageFull(true)
		if g := promtestutil.ToFloat64(p.m.StorageFull); g != 1 {
			t.Fatalf("gauge %v while full, want 1", g)
		}
		p.setStorageFull(false)
		if g := promtestutil.ToFloat64(p.m.StorageFull); g != 0 {
			t.Fatalf("gauge %v with room, want 0", g)
		}
	}
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings for 100 times full within a minute, want 1:\n%s", n, logs.String())
	}
	p.lastFullWarn.Store(time.Now().Add(-storageFullWarnEvery).UnixNano()) // a minute later
	p.setStorageFull(true)
	if n := warnings(); n != 2 {
		t.Fatalf("%d warnings after a minute, want 2", n)
	}
}
