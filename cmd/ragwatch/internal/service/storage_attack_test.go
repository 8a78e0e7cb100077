//go:build attack

package service_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestAttackFullStoreVolume fills the volume of the embedded server's store under the whole
// service (issue 46, item 3): the scoring stream and the alert-state bucket fail their writes;
// /readyz says so (degraded, still ready), ragwatch_store_write_failing follows, and lost
// samples count as storage_full at once, not as nats_unavailable after an ack timeout per
// batch. Once the volume has room the streams write again within 30 s, without a restart,
// and the records queued before the failure are still there for the scoring consumer.
func TestAttackFullStoreVolume(t *testing.T) {
	vol := testutil.Tmpfs(t, "32m")
	cfg, err := config.Parse([]byte(`
sampling: {rate: 1}
scoring: {workers: 0, queue: {batch_records: 1}}
slos:
  - {name: empty, metric: empty_retrieval_rate, alert_above: 0.9, min_samples: 1, window: 5m}
drift: {detectors: []}
`))
	if err != nil {
		t.Fatal(err)
	}
	test := testConfig(t)
	cfg.NATS.Embedded.Endpoint = test.NATS.Embedded.Endpoint
	cfg.Receivers, cfg.HTTP, cfg.Assembly = test.Receivers, test.HTTP, test.Assembly
	cfg.NATS.StoreDir = filepath.Join(vol, "store")
	e := startEnv(t, cfg)
	ctx := context.Background()
	q := cfg.Scoring.Queue

	feed := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			r := &record.Record{TraceID: fmt.Sprintf("%s%027x", prefix, i), Service: "svc", Query: strings.Repeat("q", 5000), Time: time.Now()} // larger than a page: no write fits in what a full volume has left
			if err := e.app.Records.ConsumeRecord(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	depth := func() uint64 {
		st, err := e.app.NATS.JS.Stream(ctx, q.Stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	save := func() error {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		e.app.Alerts.Evaluate(sctx)
		return e.app.Alerts.Save(sctx)
	}

	// Before: 20 records queued, the alert state saved.
	feed("bbbbb", 20)
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "20 records queued", func() bool { return depth() == 20 })
	if err := save(); err != nil {
		t.Fatalf("alert state save before the volume filled: %v", err)
	}
	if code, body := get(t, e.base+"/readyz"); code != http.StatusOK || strings.Contains(body, "degraded: store") {
		t.Fatalf("/readyz before = %d %q", code, body)
	}

	filler := testutil.FillVolume(t, vol)
	// Full: 300 records sampled. Every one is counted as storage_full, promptly.
	start := time.Now()
	feed("fffff", 300)
	t.Logf("fed in %v", time.Since(start))
	var m map[string]float64
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "300 samples counted as dropped", func() bool {
		m = scrape(t, e.base)
		return m[`ragwatch_scoring_dropped_total{reason="storage_full"}`]+m[`ragwatch_scoring_dropped_total{reason="nats_unavailable"}`]+
			m[`ragwatch_scoring_dropped_total{reason="queue_full"}`] == 300
	})
	counted := time.Since(start)
	t.Logf("full volume: 300 samples counted in %v: storage_full %v, nats_unavailable %v, queue_full %v", counted.Round(time.Millisecond),
		m[`ragwatch_scoring_dropped_total{reason="storage_full"}`], m[`ragwatch_scoring_dropped_total{reason="nats_unavailable"}`],
		m[`ragwatch_scoring_dropped_total{reason="queue_full"}`])
	if m[`ragwatch_scoring_dropped_total{reason="storage_full"}`] != 300 {
		t.Errorf("storage_full drops = %v, want 300", m[`ragwatch_scoring_dropped_total{reason="storage_full"}`])
	}
	if counted > 3*time.Second {
		t.Errorf("300 samples took %v to be counted, want well under one 5 s ack timeout", counted)
	}
	if m[`ragwatch_scoring_queue_storage_full`] != 1 || m[`ragwatch_store_write_failing{store="scoring"}`] != 1 {
		t.Errorf("storage_full gauge %v, store_write_failing{scoring} %v; want 1, 1",
			m[`ragwatch_scoring_queue_storage_full`], m[`ragwatch_store_write_failing{store="scoring"}`])
	}
	// The alert state: the save that meets the full disk times out (a small value may still fit
	// in a page the bucket's block has left), the next fails at once.
	for i := 0; scrape(t, e.base)[`ragwatch_store_write_failing{store="alerts"}`] != 1; i++ {
		if i == 20 {
			t.Fatal("no alert state save failed on a full volume")
		}
		_ = save()
	}
	start = time.Now()
	if err := save(); err == nil || time.Since(start) > time.Second {
		t.Errorf("alert state save on a full volume = %v after %v, want an error at once", err, time.Since(start))
	}
	m = scrape(t, e.base)
	if m[`ragwatch_store_write_failing{store="alerts"}`] != 1 {
		t.Errorf("store_write_failing{alerts} = %v, want 1", m[`ragwatch_store_write_failing{store="alerts"}`])
	}
	code, body := get(t, e.base+"/readyz")
	if code != http.StatusOK || !strings.Contains(body, "degraded: store: JetStream store cannot write to ") ||
		!strings.Contains(body, q.Stream+" (scoring)") || !strings.Contains(body, "KV_"+cfg.Alerting.StateBucket+" (alerts)") ||
		!strings.Contains(body, "no space left on device") {
		t.Fatalf("/readyz on a full volume = %d %q, want 200 with a degraded store line naming both", code, body)
	}
	t.Logf("/readyz on a full volume:\n%s", body)

	// Free: within 30 s (one probe, 5 s) the streams write again, without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, "the store writes again", func() bool {
		_, body := get(t, e.base+"/readyz")
		return !strings.Contains(body, "degraded: store")
	})
	recovered := time.Since(freed)
	t.Logf("writes again %v after the volume had room", recovered.Round(time.Millisecond))
	feed("aaaaa", 5)
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "5 more records queued", func() bool { return depth() == 25 })
	if err := save(); err != nil {
		t.Fatalf("alert state save after recovery: %v", err)
	}
	m = scrape(t, e.base)
	if m[`ragwatch_store_write_failing{store="scoring"}`] != 0 || m[`ragwatch_store_write_failing{store="alerts"}`] != 0 ||
		m[`ragwatch_scoring_queue_storage_full`] != 0 || m[`ragwatch_store_recoveries_total`] < 1 {
		t.Errorf("after recovery: write_failing scoring %v alerts %v, storage_full %v, recoveries %v; want 0 0 0 >=1",
			m[`ragwatch_store_write_failing{store="scoring"}`], m[`ragwatch_store_write_failing{store="alerts"}`],
			m[`ragwatch_scoring_queue_storage_full`], m[`ragwatch_store_recoveries_total`])
	}
	// The scoring consumer gets the 20 records queued before the failure, then the 5 after.
	cons, err := e.app.NATS.JS.Consumer(ctx, q.Stream, q.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(25, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for msg := range batch.Messages() {
		ids = append(ids, msg.Headers().Get(jetstream.MsgIDHeader))
		_ = msg.Ack()
	}
	if len(ids) != 25 {
		t.Fatalf("consumer got %d records after recovery, want 25: %v", len(ids), ids)
	}
	for i, id := range ids {
		want := fmt.Sprintf("bbbbb%027x", i)
		if i >= 20 {
			want = fmt.Sprintf("aaaaa%027x", i-20)
		}
		if id != want {
			t.Fatalf("record %d = %q, want %q", i, id, want)
		}
	}
}

// TestAttackFullStoreVolumeConsumersResume: after the reload that heals a full volume, the
// in-process scoring workers and the JetStream intake consumer go on by themselves: records
// the app publishes are consumed from the intake stream again, and their samples are scored.
func TestAttackFullStoreVolumeConsumersResume(t *testing.T) {
	vol := testutil.Tmpfs(t, "32m")
	cfg, err := config.Parse([]byte(`
sampling: {rate: 1}
nats: {consume: {mode: jetstream}}
drift: {detectors: []}
`))
	if err != nil {
		t.Fatal(err)
	}
	test := testConfig(t)
	cfg.NATS.Embedded.Endpoint = test.NATS.Embedded.Endpoint
	cfg.Receivers, cfg.HTTP, cfg.Assembly = test.Receivers, test.HTTP, test.Assembly
	cfg.NATS.StoreDir = filepath.Join(vol, "store")
	e := startEnv(t, cfg)
	ctx := context.Background()
	nc, err := nats.Connect(e.app.NATS.ClientURL(), e.app.NATS.AppCredential().Option())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	publish := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			rec := fmt.Sprintf(`{"trace_id":"%s%027x","service":"svc","query":"%s","answer":"a","documents":[{"id":"d","text":"t"}]}`, prefix, i, strings.Repeat("q", 500))
			if err := nc.Publish("ragwatch.records.svc", []byte(rec)); err != nil {
				t.Fatal(err)
			}
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	metric := func(name string) float64 { return testutil.Sum(t, e.app.Registry, name, nil) }
	requests := func() float64 { return scrape(t, e.base)[`ragwatch_requests_total{service="svc"}`] }

	publish("bbbbb", 5)
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "5 records ingested and scored", func() bool {
		return requests() == 5 && metric("ragwatch_scoring_attempts_total") > 0
	})

	filler := testutil.FillVolume(t, vol)
	// The app's records meet the full intake stream; sampled records, the full scoring stream.
	publish("fffff", 20)
	for i := range 20 {
		r := &record.Record{TraceID: fmt.Sprintf("ddddd%027x", i), Service: "direct", Query: "q", Time: time.Now()}
		if err := e.app.Records.ConsumeRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "the store reported failing", func() bool {
		_, body := get(t, e.base+"/readyz")
		return strings.Contains(body, "degraded: store") && strings.Contains(body, "(scoring)")
	})
	ingested := requests()

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, "the store writes again", func() bool {
		_, body := get(t, e.base+"/readyz")
		return !strings.Contains(body, "degraded: store")
	})
	t.Logf("writes again %v after the volume had room", time.Since(freed).Round(time.Millisecond))
	attempts := metric("ragwatch_scoring_attempts_total")
	publish("aaaaa", 5)
	defer func() {
		if !t.Failed() {
			return
		}
		st, err := e.app.NATS.JS.Stream(ctx, cfg.NATS.Consume.Stream)
		if err != nil {
			t.Logf("intake stream: %v", err)
			return
		}
		si, _ := st.Info(ctx)
		ci, _ := st.Consumer(ctx, "ragwatch_records")
		if ci != nil {
			info, _ := ci.Info(ctx)
			t.Logf("intake stream %+v; records consumer pending %d, waiting pulls %d", si.State, info.NumPending, info.NumWaiting)
		}
		t.Logf("requests %v (%v before recovery), scoring attempts %v (%v before)", requests(), ingested, metric("ragwatch_scoring_attempts_total"), attempts)
	}()
	resumeStart := time.Now()
	// The intake consumer pulls again at the reconnect that follows the reload; a scoring worker
	// at its next fetch (its pull waits 5 s at most).
	testutil.Eventually(t, 15*time.Second, 50*time.Millisecond, "5 more records ingested from the stream and scored", func() bool {
		return requests() >= ingested+5 && metric("ragwatch_scoring_attempts_total") > attempts
	})
	t.Logf("consumed and scored %v after publishing", time.Since(resumeStart).Round(time.Millisecond))
	t.Logf("after recovery: %v records ingested (5 before the volume filled, %v while full), scoring attempts %v -> %v",
		requests(), ingested-5, attempts, metric("ragwatch_scoring_attempts_total"))
}
