package natsconn

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestStoreWriteFailureIsSeenAndHealed fills the embedded server's volume: the stream and the
// bucket that failed a write are reported at once, later writes are refused at once as
// storage_full, and once the volume has room the streams write again with every message
// stored before the failure.
func TestStoreWriteFailureIsSeenAndHealed(t *testing.T) {
	vol := testutil.Tmpfs(t, "8m")
	defer func(d time.Duration) { storeProbeEvery = d }(storeProbeEvery)
	storeProbeEvery = 50 * time.Millisecond

	cfg := embeddedCfg(t)
	cfg.StoreDir = filepath.Join(vol, "store")
	reg := prometheus.NewRegistry()
	var logs testutil.Buffer
	c, err := Connect(context.Background(), cfg, reg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	c.Store().Watch("scoring", "S")
	c.Store().Watch("alerts", "KV_state")
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	kv, err := c.KeyValue(ctx, "state", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := c.JS.Publish(ctx, "s", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(ctx, "before", []byte("kept")); err != nil {
		t.Fatal(err)
	}

	filler := testutil.FillVolume(t, vol)
	// The write that meets the full disk is not answered by the server: it times out.
	for i := 0; c.Store().Failing("S") == nil; i++ {
		if i == 20 {
			t.Fatal("no write to the stream failed on a full volume")
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, _ = c.JS.Publish(pctx, "s", make([]byte, 8<<10))
		cancel()
	}
	// The bucket's first write that meets the full volume is not answered either: it ends
	// once the server has marked the stream, not when its context does.
	start := time.Now()
	_, err = kv.Put(ctx, "k", make([]byte, 8<<10))
	if took := time.Since(start); !errors.Is(err, ErrStoreWriteFailing) || took > time.Second {
		t.Errorf("Put meeting the full volume = %v after %v, want ErrStoreWriteFailing within 1 s", err, took)
	}
	if got := promtestutil.ToFloat64(c.store.failing.WithLabelValues("scoring")); got != 1 {
		t.Errorf("ragwatch_store_write_failing{store=scoring} = %v, want 1", got)
	}
	if got := promtestutil.ToFloat64(c.store.failing.WithLabelValues("alerts")); got != 1 {
		t.Errorf("ragwatch_store_write_failing{store=alerts} = %v, want 1", got)
	}
	if err := c.Store().Err(); err == nil || !strings.Contains(err.Error(), "S (scoring)") ||
		!strings.Contains(err.Error(), "KV_state (alerts)") || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("Err() = %v, want both streams with the cause", err)
	}
	// Later writes to the bucket are refused at once, as storage_full.
	start = time.Now()
	_, err = kv.Put(ctx, "k", []byte("x"))
	if took := time.Since(start); !errors.Is(err, ErrStoreWriteFailing) || !IsStorageFull(err) || took > 100*time.Millisecond {
		t.Errorf("Put on a failing bucket = %v after %v, want ErrStoreWriteFailing at once", err, took)
	}
	// The probe cannot write either: nothing is reloaded while the volume is full.
	time.Sleep(5 * storeProbeEvery)
	if c.Store().Failing("S") == nil || promtestutil.ToFloat64(c.store.recovered) != 0 {
		t.Fatal("recovered while the volume is still full")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, "the streams write again", func() bool { return c.Store().Err() == nil })
	t.Logf("writes again %v after the volume had room (probe every %v)", time.Since(freed).Round(time.Millisecond), storeProbeEvery)
	if got := promtestutil.ToFloat64(c.store.failing.WithLabelValues("scoring")); got != 0 {
		t.Errorf("ragwatch_store_write_failing{store=scoring} = %v after recovery, want 0", got)
	}
	if got := promtestutil.ToFloat64(c.store.recovered); got != 1 {
		t.Errorf("ragwatch_store_recoveries_total = %v, want 1", got)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := c.JS.Publish(pctx, "s", []byte("after")); err != nil {
		t.Fatalf("publish after recovery: %v", err)
	}
	if _, err := kv.Put(pctx, "after", []byte("x")); err != nil {
		t.Fatalf("KV put after recovery: %v", err)
	}
	if e, err := kv.Get(pctx, "before"); err != nil || string(e.Value()) != "kept" {
		t.Fatalf("KV key stored before the failure: %v %v", e, err)
	}
	// The messages stored before the failure are all there, in order, and then the new one.
	cons, err := c.JS.OrderedConsumer(pctx, "S", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(11, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for m := range batch.Messages() {
		got = append(got, m.Data())
	}
	if len(got) != 11 || string(got[10]) != "after" {
		t.Fatalf("stream after recovery holds %d messages (last %q), want the 10 before and \"after\"", len(got), got[len(got)-1])
	}
	for i := range 10 {
		if !bytes.Equal(got[i], []byte{byte(i)}) {
			t.Fatalf("message %d = %v, want [%d]", i, got[i], i)
		}
	}
	if !strings.Contains(logs.String(), "streams reloaded") {
		t.Errorf("no recovery log line in:\n%s", logs.String())
	}
}

// A file store's own critical-write line (a removal or compaction that failed, with no
// publish to see it) names the stream without its account: the stream is marked all the
// same, and the reload finds its account.
func TestFileStoreLineWithoutAccountIsHealed(t *testing.T) {
	defer func(d time.Duration) { storeProbeEvery = d }(storeProbeEvery)
	storeProbeEvery = 50 * time.Millisecond
	reg := prometheus.NewRegistry()
	c, err := Connect(context.Background(), embeddedCfg(t), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "WQ", Subjects: []string{"wq"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.Publish(ctx, "wq", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if got := streamAccount(c.server, "WQ"); got != "$G" {
		t.Fatalf("streamAccount(WQ) = %q, want $G", got)
	}
	changed := c.Store().Changed()
	c.store.serverError("Filestore [WQ] Critical write error: write /data/jetstream/$G/streams/WQ/msgs/3.blk: no space left on device")
	select {
	case <-changed:
	default:
		t.Fatal("Changed() not closed when a stream was marked")
	}
	if err := c.Store().Failing("WQ"); err == nil || err.Error() != "JetStream store cannot write: stream WQ: no space left on device" {
		t.Fatalf("Failing(WQ) = %v", err)
	}
	if got := promtestutil.ToFloat64(c.store.failing.WithLabelValues("other")); got != 1 {
		t.Errorf("ragwatch_store_write_failing{store=other} = %v, want 1", got)
	}
	// Other error lines mark nothing.
	c.store.serverError("JetStream failed to store a msg on stream '$G > X': maximum bytes exceeded")
	if c.Store().Failing("X") != nil {
		t.Fatal("an ordinary store error marked a stream")
	}
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, "the stream reloaded", func() bool { return c.Store().Err() == nil })
	if got := promtestutil.ToFloat64(c.store.recovered); got != 1 {
		t.Errorf("ragwatch_store_recoveries_total = %v, want 1", got)
	}
	// The client reconnected after the reload (its pull consumers ask again), and the stream
	// kept its message.
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, "the client reconnected", func() bool {
		return testutil.Sum(t, reg, "ragwatch_nats_reconnects_total", nil) == 1 && c.NC.IsConnected()
	})
	st, err := c.JS.Stream(ctx, "WQ")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.GetMsg(ctx, 1); err != nil || string(m.Data) != "kept" {
		t.Fatalf("message 1 after the reload: %v %v", m, err)
	}
}
