package join

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
)

// otlpTraceID returns a fresh trace id string as the assembler makes them (32 lowercase hex
// characters from pdata), so what the join keeps of it is counted.
func otlpTraceID(rng *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return hex.EncodeToString(b[:])
}

// BenchmarkJoinConsumeRecord measures the join's cost per record on the hot path, in the
// steady state at its bound (every record is new and evicts the oldest): memory only (records
// as the assembler makes them: OTLP ids, UTC times; and with arbitrary trace ids as records
// from NATS may carry), and with every record's state persisted to a JetStream KV bucket on a
// local server.
func BenchmarkJoinConsumeRecord(b *testing.B) {
	run := func(b *testing.B, kv jetstream.KeyValue, start, otlpIDs bool) {
		reg := prometheus.NewRegistry()
		const maxEntries = 1 << 15 // ids repeat after 1<<16 records, long evicted by then
		j, err := New(Settings{Retention: time.Hour, MaxEntries: maxEntries, Next: record.Discard,
			NextFeedback: record.FeedbackConsumerFunc(func(context.Context, record.Feedback) error { return nil }),
			KV:           kv, PersistSeen: kv != nil, Registerer: reg})
		if err != nil {
			b.Fatal(err)
		}
		if start { // the KV writer runs: the record path only queues
			if err := j.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer func() {
				b.StopTimer() // the flush of what is still queued is not the record path's cost
				_ = j.Shutdown(context.Background())
			}()
		}
		ids := make([]string, 2*maxEntries)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range ids {
			if otlpIDs {
				ids[i] = otlpTraceID(rng)
			} else {
				ids[i] = "4bf92f3577b34da6a3ce929d" + strconv.Itoa(i)
			}
		}
		r := &record.Record{Service: "support-bot", Time: time.Now().UTC().Round(0), Query: "q"}
		ctx := context.Background()
		for _, id := range ids[:maxEntries] { // fill to the bound
			r.TraceID = id
			if err := j.ConsumeRecord(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		dropped := func() float64 { return promtestutil.ToFloat64(j.kvErrors.WithLabelValues("queue_full")) }
		dropped0 := dropped()
		b.ReportAllocs()
		b.ResetTimer()
		defer benchcpu.Report(b)()
		if start {
			defer func() { b.ReportMetric((dropped()-dropped0)/float64(b.N), "dropped/op") }()
		}
		for i := maxEntries; i < maxEntries+b.N; i++ {
			r.TraceID = ids[i%len(ids)]
			if err := j.ConsumeRecord(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) { run(b, nil, false, true) })
	b.Run("memory-rawids", func(b *testing.B) { run(b, nil, false, false) })
	for _, mode := range []string{"kv-sync", "kv-queued"} {
		b.Run(mode, func(b *testing.B) {
			_, js := testutil.Connect(b, testutil.RunJetStream(b))
			kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "bench", TTL: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			run(b, kv, mode == "kv-queued", true)
		})
	}
}

// BenchmarkJoinMemory measures the memory the join holds per remembered record at its bound:
// max_entries records as the assembler makes them (fresh 32-hex trace id strings, a fresh
// service string, a UTC time), then as many again so each evicts the oldest. heap-B/entry is
// HeapAlloc after a forced GC, minus the same before the join was made, over max_entries;
// offheap-B/entry the slab slots and index cells in use outside the heap (internal/offheap);
// bytes/entry their sum.
// rawids: trace ids not in OTLP's hex form (records from NATS may carry any), kept as given.
func BenchmarkJoinMemory(b *testing.B) {
	const n = 100000
	for _, otlpIDs := range []bool{true, false} {
		name := "otlp"
		if !otlpIDs {
			name = "rawids"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				rng := rand.New(rand.NewPCG(3, 4))
				base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixNano()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				j, err := New(Settings{Retention: time.Hour, MaxEntries: n, Next: record.Discard,
					NextFeedback: record.FeedbackConsumerFunc(func(context.Context, record.Feedback) error { return nil }),
					Registerer:   prometheus.NewRegistry()})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				for i := range 2 * n {
					id := "req-" + strconv.FormatUint(rng.Uint64(), 36)
					if otlpIDs {
						id = otlpTraceID(rng)
					}
					r := &record.Record{TraceID: id, Service: strings.Clone("support-bot"), Time: time.Unix(0, base+int64(i)*1e6).UTC()}
					if err := j.ConsumeRecord(ctx, r); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
				off := float64(j.tab.offHeapBytes()) / n
				b.ReportMetric(heap, "heap-B/entry")
				b.ReportMetric(off, "offheap-B/entry")
				b.ReportMetric(heap+off, "bytes/entry")
				runtime.KeepAlive(j)
			}
		})
	}
}
