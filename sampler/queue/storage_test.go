package queue

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

// embeddedOnTmpfs connects to an embedded server whose store is on a tmpfs of size; it
// returns the connection and the volume's directory.
func embeddedOnTmpfs(t *testing.T, size string, reg prometheus.Registerer) (*natsconn.Conn, string) {
	t.Helper()
	vol := testutil.Tmpfs(t, size)
	cfg := config.Default().NATS
	cfg.StoreDir = filepath.Join(vol, "store")
	cfg.Embedded.Endpoint = "127.0.0.1:-1"
	cfg.Embedded.MaxStore = 64 << 20
	c, err := natsconn.Connect(context.Background(), cfg, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, vol
}

// When the store's volume fills, the scoring stream's server stops answering publishes: the
// records are counted as storage_full at once (not as nats_unavailable after an ack timeout
// per batch), and ragwatch_scoring_queue_storage_full says so.
func TestFullVolumeDropsAsStorageFullAtOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, vol := embeddedOnTmpfs(t, "8m", reg)
	ctx := context.Background()
	cfg := testQueueConfig()
	cfg.MaxBytes = 4 << 20
	cfg.BatchRecords = 1 // a message per record: 300 publishes awaiting their acknowledgement
	if _, err := Setup(ctx, c.JS, cfg, 1); err != nil {
		t.Fatal(err)
	}
	c.Store().Watch("scoring", cfg.Stream)
	p := NewPublisher(c.JS, cfg, 1000, reg, nil)
	p.Health = c.Store()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(ctx) }()
	for i := range 5 {
		if err := p.Offer(&record.Record{TraceID: fmt.Sprintf("before-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() int {
		n := 0
		for _, m := range storedMsgs(t, c.JS, cfg.Stream) {
			n += len(m.entries)
		}
		return n
	}
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, "5 records stored", func() bool { return stored() == 5 })

	testutil.FillVolume(t, vol)
	start := time.Now()
	big := strings.Repeat("x", 4000)
	const n = 300
	for i := range n {
		if err := p.Offer(&record.Record{TraceID: fmt.Sprintf("full-%d", i), Query: big}); err != nil {
			t.Fatal(err)
		}
	}
	dropped := func(reason string) float64 { return promtestutil.ToFloat64(p.m.Dropped.WithLabelValues(reason)) }
	testutil.Eventually(t, 3*time.Second, 10*time.Millisecond, "every record counted", func() bool {
		return dropped(DropStorageFull)+dropped(DropNATSUnavailable) == n
	})
	took := time.Since(start)
	t.Logf("%d records on a full volume counted in %v: storage_full %v, nats_unavailable %v",
		n, took.Round(time.Millisecond), dropped(DropStorageFull), dropped(DropNATSUnavailable))
	if dropped(DropStorageFull) != n || dropped(DropNATSUnavailable) != 0 || dropped(DropQueueFull) != 0 {
		t.Errorf("drops storage_full %v nats_unavailable %v queue_full %v, want all %d storage_full",
			dropped(DropStorageFull), dropped(DropNATSUnavailable), dropped(DropQueueFull), n)
	}
	if took > time.Second {
		t.Errorf("%d records took %v to be counted, want well under one ack timeout (5 s)", n, took)
	}
	if !p.StorageFull() || promtestutil.ToFloat64(p.m.StorageFull) != 1 {
		t.Errorf("StorageFull() = %v, gauge %v; want true, 1", p.StorageFull(), promtestutil.ToFloat64(p.m.StorageFull))
	}
	if got := stored(); got != 5 {
		t.Errorf("stream holds %d records, want the 5 stored before", got)
	}
}
