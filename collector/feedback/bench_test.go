package feedback

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/collector/record"
)

// BenchmarkJoinConsumeRecord measures the join's cost per record on the hot path: memory only,
// and with every change persisted to a JetStream KV bucket on a local server.
func BenchmarkJoinConsumeRecord(b *testing.B) {
	run := func(b *testing.B, kv jetstream.KeyValue, start bool) {
		reg := prometheus.NewRegistry()
		j, err := New(Settings{Retention: time.Hour, MaxEntries: 1 << 20, Next: record.Discard,
			NextFeedback: record.FeedbackConsumerFunc(func(context.Context, *record.Record) error { return nil }),
			KV:           kv, Registerer: reg})
		if err != nil {
			b.Fatal(err)
		}
		if start { // the KV writer runs: the record path only queues
			if err := j.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer func() {
				_ = j.Shutdown(context.Background())
				b.ReportMetric(testutil.ToFloat64(j.kvErrors.WithLabelValues("queue_full"))/float64(b.N), "dropped/op")
			}()
		}
		r := &record.Record{Service: "support-bot", Time: time.Now(), Query: "q"}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			r.TraceID = "4bf92f3577b34da6a3ce929d" + strconv.Itoa(i)
			if err := j.ConsumeRecord(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) { run(b, nil, false) })
	for _, mode := range []string{"kv-sync", "kv-queued"} {
		b.Run(mode, func(b *testing.B) {
			js := runJetStream(b)
			kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "bench", TTL: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			run(b, kv, mode == "kv-queued")
		})
	}
}
