package join

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// blockingKV holds every Get, Put and Delete until released, as a slow or unreachable NATS
// would.
type blockingKV struct {
	jetstream.KeyValue
	release chan struct{}
	calls   atomic.Int64
}

func (b *blockingKV) wait(ctx context.Context) error {
	b.calls.Add(1)
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *blockingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return b.KeyValue.Get(ctx, key)
}

func (b *blockingKV) Put(ctx context.Context, key string, v []byte) (uint64, error) {
	if err := b.wait(ctx); err != nil {
		return 0, err
	}
	return b.KeyValue.Put(ctx, key, v)
}

func (b *blockingKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if err := b.wait(ctx); err != nil {
		return err
	}
	return b.KeyValue.Delete(ctx, key, opts...)
}

// Feedback for a trace the join does not know costs no KV round trip on the caller's
// goroutine: the lookup of other sidecars' records and the write of the pending feedback go
// to the writer, so a slow bucket never slows POST /api/v1/feedback or the NATS intake.
func TestUnknownTraceFeedbackDoesNotWaitForKV(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_feedback", TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	bkv := &blockingKV{KeyValue: kv, release: make(chan struct{})}
	clk := testutil.NewClock(t0)
	j, s := newJoin(t, bkv, clk, prometheus.NewRegistry())

	done := make(chan error, 1)
	go func() {
		for i := range 10 {
			if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: fmt.Sprintf("unknown-%d", i), Score: -1}); err != nil {
				done <- err
				return
			}
		}
		done <- j.ConsumeRecord(ctx, rec("unknown-0")) // joins the early feedback without KV either
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		close(bkv.release)
		t.Fatal("ConsumeFeedback waited for the KV bucket")
	}
	if j.Pending() != 9 || len(s.records) != 1 || s.records[0].Feedback == nil {
		t.Fatalf("pending = %d, records %+v; want 9 waiting and the record joined", j.Pending(), s.records)
	}
	testutil.Eventually(t, 2*time.Second, 2*time.Millisecond, "the writer reaching the bucket", func() bool { return bkv.calls.Load() >= 1 })
	close(bkv.release)
	// The writer catches up: the waiting feedback lands in the bucket, the joined one leaves it.
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "pending feedback persisted", func() bool {
		keys, err := kv.Keys(ctx)
		pend := 0
		for _, k := range keys {
			if strings.HasPrefix(k, pendPrefix) {
				pend++
			}
		}
		return err == nil && pend == 9
	})
	if _, err := kv.Get(ctx, pendPrefix+"unknown-0"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the joined feedback's key: %v, want it deleted", err)
	}
}

// A bucket holding more traces than max_entries (another sidecar with a bigger max, a config
// change, persist_seen over days) is not read whole into memory at start: at most max_entries
// are loaded, those expiring last, and the rest is counted.
func TestLoadHoldsAtMostMaxEntries(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_feedback", TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const stored, maxEntries = 10, 4
	for i := range stored {
		// Written in an order unrelated to expiry, as several sidecars would.
		n := (i * 7) % stored
		e := entry{TraceID: fmt.Sprintf("trace-%d", n), Pending: []pending{{Feedback: record.Feedback{Score: -1, Time: t0}}},
			Expires: t0.Add(time.Hour + time.Duration(n)*time.Minute)}
		data, _ := json.Marshal(e)
		if _, err := kv.Put(ctx, pendPrefix+e.TraceID, data); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	s := &sink{}
	j, err := New(Settings{Retention: time.Hour, MaxEntries: maxEntries, Next: s, NextFeedback: s, KV: kv, Registerer: reg,
		Now: testutil.NewClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Shutdown(ctx) }()
	if j.Pending() != maxEntries || j.tab.len() != maxEntries {
		t.Fatalf("loaded %d traces with %d pending, want %d", j.tab.len(), j.Pending(), maxEntries)
	}
	for n := stored - maxEntries; n < stored; n++ {
		if j.tab.find(fmt.Sprintf("trace-%d", n)) < 0 {
			t.Errorf("trace-%d (expiring last) not loaded", n)
		}
	}
	if got := promtestutil.ToFloat64(j.kvErrors.WithLabelValues("load_skipped")); got != stored-maxEntries {
		t.Errorf("load_skipped = %v, want %d", got, stored-maxEntries)
	}
	if _, orphaned := joined(t, reg); orphaned != 0 || len(s.forwarded()) != 0 {
		t.Errorf("skipped traces must not be orphaned at start: orphaned %v, forwarded %d", orphaned, len(s.forwarded()))
	}
}

// The queue to the writer is bounded: with the bucket stuck, a flood of feedback is still
// taken at once and the KV work beyond the queue is dropped and counted, not waited for.
func TestWriterQueueIsBounded(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_feedback", TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	bkv := &blockingKV{KeyValue: kv, release: make(chan struct{})}
	j, _ := newJoin(t, bkv, testutil.NewClock(t0), prometheus.NewRegistry())
	defer close(bkv.release) // before the join's cleanup: its writer flushes the queue then
	const n = opsQueueSize   // two ops each: a pending write and a lookup
	start := time.Now()
	for i := range n {
		if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: fmt.Sprintf("flood-%d", i), Score: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%d feedback took %s with the bucket stuck", n, d)
	}
	// The writer holds one op; the queue the next opsQueueSize; the rest is dropped.
	dropped := promtestutil.ToFloat64(j.kvErrors.WithLabelValues("queue_full"))
	if dropped < 2*n-opsQueueSize-1 || dropped > 2*n-opsQueueSize {
		t.Fatalf("queue_full = %v, want %d or %d", dropped, 2*n-opsQueueSize-1, 2*n-opsQueueSize)
	}
	if j.Pending() != n {
		t.Fatalf("pending = %d, want every feedback held in memory (%d)", j.Pending(), n)
	}
}

// A bucket at feedback.max_bytes refuses writes: the join counts them as storage_full, says so
// (StorageFull, shown by /readyz) and keeps joining from memory.
func TestFullBucketDegradesToMemory(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_feedback", TTL: 2 * time.Hour, MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	j, s := newJoin(t, kv, testutil.NewClock(t0), reg)
	const n = 100
	for i := range n {
		if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: fmt.Sprintf("waiting-%d", i), Score: -1, Comment: strings.Repeat("c", 100)}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the bucket refusing writes", func() bool {
		return j.StorageFull() && promtestutil.ToFloat64(j.kvErrors.WithLabelValues("storage_full")) > 0
	})
	if put := promtestutil.ToFloat64(j.kvErrors.WithLabelValues("put")); put != 0 {
		t.Errorf("put errors = %v: a full bucket counts as storage_full", put)
	}
	// Joining goes on from memory.
	if err := j.ConsumeRecord(ctx, rec(fmt.Sprintf("waiting-%d", n-1))); err != nil {
		t.Fatal(err)
	}
	if len(s.records) != 1 || s.records[0].Feedback == nil || j.Pending() != n-1 {
		t.Fatalf("record %+v, pending %d: want the feedback joined from memory", s.records, j.Pending())
	}
}
