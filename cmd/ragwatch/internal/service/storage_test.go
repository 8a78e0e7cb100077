package service_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// Every stream and KV bucket ragwatch creates is capped as the config says (StorageCaps), so
// the embedded store cannot outgrow the volume it lives on and take the app's pod with it.
func TestEveryStreamIsCapped(t *testing.T) {
	cfg := testConfig(t)
	cfg.NATS.Consume.Mode = config.NATSModeJetStream // the intake stream and the dedup bucket too
	e := startEnv(t, cfg)

	want := map[string]int64{}
	for _, sc := range cfg.StorageCaps() {
		want[sc.Name] = sc.MaxBytes
	}
	ctx := context.Background()
	got := map[string]int64{}
	l := e.app.NATS.JS.ListStreams(ctx)
	for info := range l.Info() {
		got[info.Config.Name] = info.Config.MaxBytes
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("streams = %v, want %v", got, want)
	}
	for name, b := range got {
		if b <= 0 {
			t.Errorf("stream %s has no byte cap (max_bytes %d)", name, b)
		} else if want[name] != b {
			t.Errorf("stream %s max_bytes = %d, want %d", name, b, want[name])
		}
	}
}

// When JetStream refuses samples for lack of storage, intake degrades to counting: every
// record still gets its signals, each refused sample is counted (storage_full), the gauge and
// /readyz say so, and the pod stays ready.
func TestStorageFullDegradesToCounting(t *testing.T) {
	cfg := testConfig(t)
	cfg.Sampling.Rate = 1
	cfg.Scoring.Workers = 0              // nobody takes records off the queue
	cfg.Scoring.Queue.MaxBytes = 8 << 10 // a handful of records
	// One record a message, all of one size: once one is refused, every later one is too (no
	// worker makes room), so the gauge, which follows the last acknowledged publish, stays
	// set. Batches formed by timing could end with one small enough to fit and clear it.
	cfg.Scoring.Queue.BatchRecords = 1
	e := startEnv(t, cfg)

	const n = 40
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"trace_id":"%032x","service":"full-app","query":"%s","answer":"a"}`, i+1, strings.Repeat("q", 1000))
	}
	b.WriteString("]")
	resp, err := http.Post(e.base+"/api/v1/records", "application/json", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	var m map[string]float64
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "samples refused for storage", func() bool {
		m = scrape(t, e.base)
		return m[`ragwatch_scoring_dropped_total{reason="storage_full"}`] > 0 && m[`ragwatch_requests_total{service="full-app"}`] == n
	})
	if m[`ragwatch_scoring_queue_storage_full`] != 1 {
		t.Errorf("ragwatch_scoring_queue_storage_full = %v, want 1", m[`ragwatch_scoring_queue_storage_full`])
	}
	if q := m[`ragwatch_scoring_dropped_total{reason="queue_full"}`]; q != 0 {
		t.Errorf("queue_full drops = %v, want 0: the stream's refusals are storage_full", q)
	}
	code, body := get(t, e.base+"/readyz")
	if code != http.StatusOK || !strings.Contains(body, "degraded: scoring_queue: JetStream storage full") {
		t.Fatalf("/readyz = %d %q, want 200 with the storage_full line", code, body)
	}
}

// With an external cluster, NATS going away does not make the sidecar (and so the app's pod)
// unready: /readyz reports it and stays 200.
func TestExternalNATSDownKeepsSidecarReady(t *testing.T) {
	s := testutil.RunJetStream(t)
	cfg := testConfig(t)
	cfg.NATS.URL = config.SecretURL(s.ClientURL())
	cfg.NATS.ReconnectWait = 50 * time.Millisecond
	cfg.NATS.ReconnectMaxWait = 100 * time.Millisecond
	e := startEnv(t, cfg)
	if code, body := get(t, e.base+"/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz with NATS up = %d %q", code, body)
	}
	s.Shutdown()
	s.WaitForShutdown()
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "NATS reported down", func() bool {
		_, body := get(t, e.base+"/readyz")
		return strings.Contains(body, "degraded: nats: NATS is not connected")
	})
	if code, body := get(t, e.base+"/readyz"); code != http.StatusOK || !strings.HasPrefix(body, "ready\n") {
		t.Fatalf("/readyz with external NATS down = %d %q, want 200", code, body)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The fast half of TestAttackFullStoreVolume (tag attack): on a full store volume the service
// says so in /readyz (still 200) and ragwatch_store_write_failing, and samples count as
// storage_full at once. The attack test also frees the volume and waits for the recovery.
func TestFullStoreVolumeIsReported(t *testing.T) {
	vol := testutil.Tmpfs(t, "32m")
	cfg := testConfig(t)
	cfg.NATS.StoreDir = filepath.Join(vol, "store")
	cfg.Sampling.Rate = 1
	cfg.Scoring.Workers = 0
	cfg.Scoring.Queue.BatchRecords = 1
	// The state saved at shutdown would fail on the full volume, and the harness fails the
	// test on a shutdown error; the attack test covers the alert state.
	cfg.Alerting.StateBucket = ""
	e := startEnv(t, cfg)
	testutil.FillVolume(t, vol)
	const n = 100
	start := time.Now()
	for i := range n {
		// Larger than a page: no write fits in what the full volume has left.
		r := &record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: "svc", Query: strings.Repeat("q", 5000), Time: time.Now()}
		if err := e.app.Records.ConsumeRecord(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]float64
	testutil.Eventually(t, 4*time.Second, 20*time.Millisecond, "every sample counted", func() bool {
		m = scrape(t, e.base)
		return m[`ragwatch_scoring_dropped_total{reason="storage_full"}`]+m[`ragwatch_scoring_dropped_total{reason="nats_unavailable"}`] == n
	})
	if took := time.Since(start); m[`ragwatch_scoring_dropped_total{reason="storage_full"}`] != n || took > 2*time.Second {
		t.Errorf("storage_full %v of %d after %v, want all, well under one 5 s ack timeout", m[`ragwatch_scoring_dropped_total{reason="storage_full"}`], n, took)
	}
	if m[`ragwatch_store_write_failing{store="scoring"}`] != 1 {
		t.Errorf(`ragwatch_store_write_failing{store="scoring"} = %v, want 1`, m[`ragwatch_store_write_failing{store="scoring"}`])
	}
	code, body := get(t, e.base+"/readyz")
	if code != http.StatusOK || !strings.Contains(body, "degraded: store: JetStream store cannot write to RAGWATCH_SCORING (scoring)") {
		t.Fatalf("/readyz = %d %q, want 200 with the store line", code, body)
	}
}
