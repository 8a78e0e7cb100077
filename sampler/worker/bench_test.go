package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/queue"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
	"github.com/ragwatch/ragwatch/scripts/synthrec"
)

// benchRecords are loadgen's records as the sampler offers them (scripts/synthrec): 6.2 KB of
// JSON on average, 5 documents of 1 KB, a few history messages, a route attribute.
func benchRecords(b *testing.B) []*record.Record {
	recs, err := synthrec.Records(1, 2000)
	if err != nil {
		b.Fatal(err)
	}
	return recs
}

// BenchmarkWorkerDecode is handle's decode of a queued record: loadgen's records in turn, as
// the publisher encodes them.
func BenchmarkWorkerDecode(b *testing.B) {
	recs := benchRecords(b)
	data := make([][]byte, len(recs))
	size := 0
	for i, r := range recs {
		var err error
		if data[i], err = json.Marshal(r); err != nil {
			b.Fatal(err)
		}
		size += len(data[i])
	}
	b.ReportAllocs()
	stop := benchcpu.Report(b)
	i := 0
	for b.Loop() {
		var r record.Record
		if err := json.Unmarshal(data[i%len(data)], &r); err != nil || r.TraceID == "" {
			b.Fatal("decode failed", err)
		}
		i++
	}
	stop()
	b.ReportMetric(float64(size)/float64(len(data)), "record-bytes")
}

// BenchmarkQueueRoundTrip is the sampled path's plumbing end to end, in one process with an
// embedded JetStream server (file storage): Offer each record to the publisher, which encodes
// and publishes it; the pool (config's 4 workers) pulls, decodes, scores it with a scorer that
// does nothing, hands on the result and acks. cpu-ns/op is the whole process's CPU per record,
// the server's included. Records travel in each of scoring.queue.encoding's forms, the binary
// one in batches (the defaults) and one a message.
func BenchmarkQueueRoundTrip(b *testing.B) {
	batch := config.Default().Scoring.Queue.BatchRecords
	for _, c := range []struct {
		name     string
		encoding string
		batch    int
	}{
		{"binary", queue.EncodingBinary, batch}, // the defaults: batches
		{"binary_unbatched", queue.EncodingBinary, 1},
		{"json", queue.EncodingJSON, 1},
	} {
		b.Run(c.name, func(b *testing.B) { benchQueueRoundTrip(b, c.encoding, c.batch) })
	}
}

func benchQueueRoundTrip(b *testing.B, encoding string, batch int) {
	recs := benchRecords(b)
	s := testutil.RunJetStream(b)
	_, js := testutil.Connect(b, s)
	rt := config.Default().Scoring.ScoringRuntime
	rt.Queue.Encoding = encoding
	rt.Queue.BatchRecords = batch
	ctx := context.Background()
	if _, err := queue.Setup(ctx, js, rt.Queue, 1); err != nil {
		b.Fatal(err)
	}
	var scored atomic.Int64
	sink := score.ConsumerFunc(func(_ context.Context, rs []score.Result) error {
		scored.Add(int64(len(rs)))
		return nil
	})
	pool := New(js, rt, []score.Scorer{okScorer}, sink, testOptions(prometheus.NewRegistry()))
	if err := pool.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pool.Shutdown(ctx) }()
	pubReg := prometheus.NewRegistry()
	pub := queue.NewPublisher(js, rt.Queue, 1000, pubReg, quiet)
	if err := pub.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pub.Shutdown(ctx) }()

	b.ReportAllocs()
	stop := benchcpu.Report(b)
	start := time.Now()
	n := 0
	for b.Loop() {
		r := *recs[n%len(recs)]
		r.TraceID = fmt.Sprintf("%032x", n+1) // a new key: the stream would drop a duplicate
		n++
		// At most maxInFlight records wait to be scored: the publisher alone outruns the
		// workers, and a backlog past the stream's max_bytes (30 MiB, ≈ 4,900 of these
		// records) would be refused as storage_full and never scored.
		for wait := time.Now().Add(time.Minute); int64(n)-scored.Load() > maxInFlight; time.Sleep(50 * time.Microsecond) {
			if time.Now().After(wait) {
				b.Fatalf("%d records waiting to be scored for a minute, publisher drops: %s", int64(n)-scored.Load(), gatherDropped(b, pubReg))
			}
		}
		for {
			err := pub.Offer(&r)
			if err == nil {
				break
			}
			if !errors.Is(err, queue.ErrQueueFull) {
				b.Fatal(err)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for scored.Load() < int64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d records scored, publisher drops: %s", scored.Load(), n, gatherDropped(b, pubReg))
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(n), "wall-ns/record")
}

// maxInFlight bounds BenchmarkQueueRoundTrip's records published and not yet scored (6 MB).
const maxInFlight = 1000

// gatherDropped formats the publisher's drop counters by reason.
func gatherDropped(b *testing.B, reg *prometheus.Registry) string {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := ""
	for _, mf := range mfs {
		if mf.GetName() != "ragwatch_scoring_dropped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				out += fmt.Sprintf("%s=%v ", m.GetLabel()[0].GetValue(), v)
			}
		}
	}
	return out
}
