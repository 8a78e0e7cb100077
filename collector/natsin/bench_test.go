package natsin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
)

// BenchmarkRecordsIntake measures records consumed per second from the embedded server, in
// core mode and in jetstream mode (dedup mark in KV + double ack per record).
func BenchmarkRecordsIntake(b *testing.B) {
	for _, mode := range []string{config.NATSModeCore, config.NATSModeJetStream} {
		b.Run(mode, func(b *testing.B) {
			conn, app, cfg := embedded(b)
			cfg.Consume.Mode = mode
			ctx := context.Background()
			var kv jetstream.KeyValue
			if mode == config.NATSModeJetStream {
				var err error
				if kv, err = conn.KeyValue(ctx, cfg.Consume.DedupBucket, cfg.Consume.DedupWindow, cfg.Consume.DedupMaxBytes); err != nil {
					b.Fatal(err)
				}
			}
			done := make(chan struct{}, 1)
			n := 0
			sink := record.ConsumerFunc(func(context.Context, *record.Record) error {
				n++
				if n == b.N {
					done <- struct{}{}
				}
				return nil
			})
			reg := prometheus.NewRegistry()
			s, err := New(Settings{NC: conn.NC, JS: conn.JS, Config: cfg, Records: sink, Metrics: ingest.NewMetrics(reg), DedupKV: kv, Registerer: reg})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Shutdown(ctx) }()
			js, _ := jetstream.New(app)
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				data := fmt.Appendf(nil, `{"trace_id":"4bf92f3577b34da6a3ce929d%010d","service":"support-bot","query":"q","answer":"a [1]","documents":[{"id":"d1","score":0.5}]}`, i)
				if mode == config.NATSModeJetStream {
					if _, err := js.PublishAsync("ragwatch.records.x", data); err != nil {
						b.Fatal(err)
					}
				} else if err := app.Publish("ragwatch.records.x", data); err != nil {
					b.Fatal(err)
				}
			}
			_ = app.Flush()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				b.Fatalf("consumed %d of %d", n, b.N)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}
