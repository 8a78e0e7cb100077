//go:build attack

package natsconn

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// The way back for each reply-bearing app message (a service import's response map) costs the
// embedded server memory until it is answered or responseThreshold passes. An app that floods
// records with replies must not grow the server without bound: in core mode nobody answers and
// the short threshold bounds them; in jetstream mode the stream answers each as it stores it.
// Each mode floods 200,000 such messages, prints the peak of pending responses (sampled while
// flooding) and the heap, and requires them gone within two thresholds of the flood's end.
func TestAttackUnansweredRepliesExpire(t *testing.T) {
	for _, mode := range []string{ModeCore, ModeJetStream} {
		t.Run(mode, func(t *testing.T) {
			cfg := embeddedCfg(t)
			cfg.Consume.Mode = mode
			c, err := Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var got atomic.Int64
			if mode == ModeJetStream {
				if _, err := c.JS.CreateStream(context.Background(), jetstream.StreamConfig{
					Name: cfg.Consume.Stream, Subjects: appSubjects(cfg.Subjects), Storage: jetstream.MemoryStorage}); err != nil {
					t.Fatal(err)
				}
			}
			sub, err := c.NC.QueueSubscribe("ragwatch.records.>", "ragwatch", func(*nats.Msg) { got.Add(1) })
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.SetPendingLimits(-1, -1); err != nil {
				t.Fatal(err)
			}
			if err := c.NC.Flush(); err != nil {
				t.Fatal(err)
			}
			app, err := nats.Connect(c.ClientURL(), c.AppCredential().Option())
			if err != nil {
				t.Fatal(err)
			}
			defer app.Close()

			acc := c.server.GlobalAccount()
			var peak atomic.Int64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					if n := int64(acc.NumPendingAllResponses()); n > peak.Load() {
						peak.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			const n = 200000
			start := time.Now()
			data := []byte(`{"trace_id":"t","service":"s","query":"q"}`)
			for i := range n {
				if err := app.PublishMsg(&nats.Msg{Subject: "ragwatch.records.flood", Reply: "_INBOX_app.r" + strconv.Itoa(i), Data: data}); err != nil {
					t.Fatal(err)
				}
			}
			if err := app.Flush(); err != nil {
				t.Fatal(err)
			}
			for got.Load() < n && time.Since(start) < time.Minute {
				time.Sleep(5 * time.Millisecond)
			}
			took := time.Since(start)
			close(stop)
			<-sampled
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			t.Logf("%s: %d reply-bearing messages in %v (%.0f/s): at most %d responses pending, %d at the end",
				mode, got.Load(), took.Round(time.Millisecond), float64(got.Load())/took.Seconds(), peak.Load(), acc.NumPendingAllResponses())
			if got.Load() != n {
				t.Fatalf("ragwatch got %d of %d messages", got.Load(), n)
			}
			deadline := time.Now().Add(2*responseThreshold(mode) + 2*time.Second)
			for acc.NumPendingAllResponses() > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d responses still pending %v after the flood", acc.NumPendingAllResponses(), time.Since(start))
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("%s: none pending %v after the flood began", mode, time.Since(start).Round(10*time.Millisecond))
			if limit := int64(float64(n) / took.Seconds() * 2 * responseThreshold(mode).Seconds() * 1.5); peak.Load() > limit && mode == ModeCore {
				t.Fatalf("%d responses pending at the peak, over 1.5 × rate × 2 thresholds = %d", peak.Load(), limit)
			}
		})
	}
}
