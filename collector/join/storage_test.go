package join

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/natsconn"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// When the embedded server's volume fills, the bucket's stream fails every write without
// answering: the join's writes are refused at once and counted as storage_full (one 5 s
// timeout each before), and the join goes on from memory.
func TestFailingStoreDegradesToMemoryAtOnce(t *testing.T) {
	vol := testutil.Tmpfs(t, "8m")
	cfg := config.Default().NATS
	cfg.StoreDir = filepath.Join(vol, "store")
	cfg.Embedded.Endpoint = "127.0.0.1:-1"
	cfg.Embedded.MaxStore = 64 << 20
	c, err := natsconn.Connect(context.Background(), cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	kv, err := c.KeyValue(ctx, "ragwatch_feedback", 2*time.Hour, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	testutil.FillVolume(t, vol)
	// The write that meets the full volume is not answered; the stream is failing from then on.
	for i := 0; c.Store().Failing("KV_ragwatch_feedback") == nil; i++ {
		if i == 20 {
			t.Fatal("no write to the bucket failed on a full volume")
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, _ = kv.Put(pctx, "probe", make([]byte, 8<<10))
		cancel()
	}

	reg := prometheus.NewRegistry()
	j, s := newJoin(t, kv, testutil.NewClock(t0), reg)
	const n = 50
	start := time.Now()
	for i := range n {
		if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: fmt.Sprintf("waiting-%d", i), Score: -1, Comment: strings.Repeat("c", 100)}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 3*time.Second, 5*time.Millisecond, "every write counted", func() bool {
		return promtestutil.ToFloat64(j.kvErrors.WithLabelValues("storage_full")) >= n
	})
	if took := time.Since(start); took > time.Second {
		t.Errorf("%d refused writes took %v, want them refused at once", n, took)
	}
	if !j.StorageFull() {
		t.Error("StorageFull() = false while the store cannot write")
	}
	if put := promtestutil.ToFloat64(j.kvErrors.WithLabelValues("put")); put != 0 {
		t.Errorf("put errors = %v: a store that cannot write counts as storage_full", put)
	}
	// Joining goes on from memory; the delete of the joined feedback is refused quietly too.
	if err := j.ConsumeRecord(ctx, rec("waiting-0")); err != nil {
		t.Fatal(err)
	}
	if len(s.records) != 1 || s.records[0].Feedback == nil || j.Pending() != n-1 {
		t.Fatalf("record %+v, pending %d: want the feedback joined from memory", s.records, j.Pending())
	}
	testutil.Eventually(t, 3*time.Second, 5*time.Millisecond, "the delete counted", func() bool {
		return promtestutil.ToFloat64(j.kvErrors.WithLabelValues("storage_full")) >= n+1
	})
	if d := promtestutil.ToFloat64(j.kvErrors.WithLabelValues("delete")); d != 0 {
		t.Errorf("delete errors = %v, want the refused delete counted as storage_full", d)
	}
}
