package queue

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestSplitBatch(t *testing.T) {
	a, err := appendRecord(nil, &record.Record{TraceID: "a", Query: "q"})
	if err != nil {
		t.Fatal(err)
	}
	j := []byte(`{"trace_id":"b","query":"q"}`) // a record JSON carries travels as JSON in a batch too
	data := appendBatchEntry(appendBatchEntry([]byte(batchMagic), a), j)
	got, err := SplitBatch(data)
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], a) || !bytes.Equal(got[1], j) {
		t.Fatalf("SplitBatch = %q, %v", got, err)
	}
	for i, e := range got {
		var r record.Record
		if err := DecodeRecord(e, &r); err != nil || r.TraceID != string(rune('a'+i)) || r.Query != "q" {
			t.Fatalf("entry %d: %+v, %v", i, r, err)
		}
	}
	for name, bad := range map[string][]byte{
		"not a batch":  a,
		"empty":        []byte(batchMagic),
		"cut length":   data[:len(batchMagic)+2],
		"cut record":   data[:len(data)-1],
		"length bytes": append([]byte(batchMagic), 0xff, 0xff, 0xff, 0xff, 'x'),
	} {
		if got, err := SplitBatch(bad); err == nil {
			t.Errorf("%s: SplitBatch = %q, want an error", name, got)
		}
	}
	// The retry headers round-trip; a message without them, or with unreadable ones, has none.
	at := time.UnixMilli(time.Now().Add(time.Minute).UnixMilli())
	m := NewRetryMsg("s", "id", got, 2, at)
	if r, ok := RetryOf(m.Header); !ok || r.Attempts != 2 || !r.At.Equal(at) || m.Header.Get(nats.MsgIdHdr) != "id" {
		t.Fatalf("RetryOf = %+v, %v; headers %v", r, ok, m.Header)
	}
	odd := at.Add(300 * time.Microsecond) // a retry time between milliseconds is rounded up
	if r, ok := RetryOf(NewRetryMsg("s", "id", got, 1, odd).Header); !ok || r.At.Before(odd) || r.At.Sub(odd) >= time.Millisecond {
		t.Fatalf("retry at %v for %v, want it rounded up to the millisecond", r.At, odd)
	}
	if again, err := SplitBatch(m.Data); err != nil || len(again) != 2 || !bytes.Equal(again[1], j) {
		t.Fatalf("retry batch splits into %q, %v", again, err)
	}
	for _, h := range []nats.Header{{}, {HeaderAttempts: {"x"}, HeaderRetryAt: {"1"}}, {HeaderAttempts: {"0"}, HeaderRetryAt: {"1"}}, {HeaderAttempts: {"1"}}} {
		if r, ok := RetryOf(h); ok {
			t.Errorf("RetryOf(%v) = %+v, want none", h, r)
		}
	}
}

// FuzzSplitBatch: whatever a batch message holds never crashes the split, and what it accepts
// is the message itself, entry after entry.
func FuzzSplitBatch(f *testing.F) {
	a, _ := appendRecord(nil, &record.Record{TraceID: "a", Query: "q"})
	f.Add(appendBatchEntry(appendBatchEntry([]byte(batchMagic), a), []byte(`{"trace_id":"b"}`)))
	f.Add([]byte(batchMagic))
	f.Add(append([]byte(batchMagic), 0, 0, 0, 0))
	f.Add(append([]byte(batchMagic), 0xff, 0xff, 0xff, 0xff))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := SplitBatch(data)
		if err != nil {
			return
		}
		again := []byte(batchMagic)
		for _, e := range entries {
			again = appendBatchEntry(again, e)
			var r record.Record
			_ = DecodeRecord(e, &r) // may fail; must not panic
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("%q split into %q", data, entries)
		}
	})
}

// Records larger than a batch can hold together go in as many messages as the server's max
// payload needs, none over it, every record once.
func TestPublisherBatchesWithinMaxPayload(t *testing.T) {
	s := testutil.RunJetStream(t)
	nc, js := testutil.Connect(t, s)
	ctx := context.Background()
	cfg := testQueueConfig()
	cfg.MaxBytes = 64 << 20
	if _, err := Setup(ctx, js, cfg, 1); err != nil {
		t.Fatal(err)
	}
	const n = 40
	p := NewPublisher(js, cfg, n, prometheus.NewRegistry(), nil)
	big := strings.Repeat("x", 100<<10) // 100 KiB: about 10 fit in the 1 MiB max payload
	recs := make([]*record.Record, n)
	for i := range recs {
		recs[i] = &record.Record{TraceID: fmt.Sprintf("%032x", i), Query: big}
	}
	publishBuffered(t, p, recs)
	msgs := storedMsgs(t, js, cfg.Stream)
	records := 0
	for seq, m := range msgs {
		if !m.batch || int64(len(m.Data)) > nc.MaxPayload() || len(m.entries) < 2 {
			t.Fatalf("message %d: %d bytes, %d records; max payload %d", seq, len(m.Data), len(m.entries), nc.MaxPayload())
		}
		records += len(m.entries)
	}
	if records != n || len(msgs) < 4 || len(msgs) > 6 {
		t.Fatalf("%d records in %d messages, want %d in 4 to 6", records, len(msgs), n)
	}
	if d := promtestutil.ToFloat64(p.m.Dropped.WithLabelValues(DropTooLarge)); d != 0 {
		t.Fatalf("%v dropped as too large", d)
	}
}

// A batch the stream refuses for lack of storage counts each of its records as storage_full.
func TestPublisherCountsARefusedBatchByRecord(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	ctx := context.Background()
	cfg := testQueueConfig()
	cfg.MaxBytes = 4096
	if _, err := Setup(ctx, js, cfg, 1); err != nil {
		t.Fatal(err)
	}
	p := NewPublisher(js, cfg, 20, prometheus.NewRegistry(), nil)
	recs := make([]*record.Record, 20) // 20 KB in one batch: more than the stream holds
	for i := range recs {
		recs[i] = &record.Record{TraceID: fmt.Sprintf("big-%d", i), Query: strings.Repeat("x", 1000)}
	}
	publishBuffered(t, p, recs)
	if got := streamMsgs(t, js, cfg.Stream); got != 0 {
		t.Fatalf("stream holds %d messages, want none", got)
	}
	if full := promtestutil.ToFloat64(p.m.Dropped.WithLabelValues(DropStorageFull)); full != 20 {
		t.Fatalf("storage_full drops = %v, want 20: one per record of the refused batch", full)
	}
	if !p.StorageFull() {
		t.Fatal("storage full not reported")
	}
}
