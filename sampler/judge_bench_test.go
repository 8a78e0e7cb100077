package sampler

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm/openai"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
)

// benchJudge is an OpenAI-compatible judge on a real listener: "ok" answers a rubric verdict
// after latency, "slow" a 503 after latency, "dead" never answers.
type benchJudge struct {
	mode     string
	latency  time.Duration
	requests atomic.Int64
}

func (j *benchJudge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	j.requests.Add(1)
	_, _ = io.Copy(io.Discard, r.Body) // until it is read, a client giving up does not end r.Context()
	var after <-chan time.Time
	if j.mode != "dead" {
		t := time.NewTimer(j.latency)
		defer t.Stop()
		after = t.C
	}
	select {
	case <-after:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if j.mode == "slow" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"judge overloaded"}}`)
		return
	}
	_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"judge","choices":[{"index":0,`+
		`"message":{"role":"assistant","content":"{\"reasoning\":\"fine\",\"score\":4}"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":900,"completion_tokens":12,"total_tokens":912}}`)
}

// BenchmarkIngestWithJudge is the sampler's share of ingestion — the stage deciding, the
// publisher queueing 10% of the records on an embedded JetStream — with in-process workers
// asking an LLM judge that is healthy, slow (503) or dead, against no workers at all
// (scoring.workers: 0). One op is one record through the stage, timed until every sampled
// record is in the stream. cpu-ns/op is the whole process (JetStream server, workers, judge
// client and the test's judge server included): a judge path that spins, redelivers in a
// loop or works per failure shows up as cpu-ns/op above judge=none. The judge answers after
// 100 ms, 10-50 times faster than the judges of docs/performance.md, so it is called more
// often per record than there.
func BenchmarkIngestWithJudge(b *testing.B) {
	doc := strings.Repeat("refund policy text ", 54) // ≈ 1 KB, like the loadgen's documents
	answer := strings.Repeat("the answer ", 45)
	docs := make([]record.Document, 5)
	for i := range docs {
		docs[i] = record.Document{ID: fmt.Sprintf("doc-%d", i), Content: doc}
	}
	for _, mode := range []string{"none", "ok", "slow", "dead"} {
		b.Run("judge="+mode, func(b *testing.B) {
			_, js := testutil.Connect(b, testutil.RunJetStream(b))

			cfg := config.Default()            // sampling.rate 0.1, 4 workers, max_retries 3
			cfg.Sampling.Buffer = b.N/5 + 1024 // the stage never drops: every sampled record is published
			// and the stream keeps every one of them: the default 30 MiB holds ≈ 5,000 of these
			// records, fewer than a second of ops samples, and the rest would be refused.
			cfg.Scoring.Queue.MaxBytes = 1 << 30
			var scorers []score.Scorer
			j := &benchJudge{mode: mode, latency: 100 * time.Millisecond}
			if mode == "none" {
				cfg.Scoring.Workers = 0
			} else {
				hs := httptest.NewServer(j)
				defer hs.Close()
				tr := &http.Transport{}
				defer tr.CloseIdleConnections()
				be := openai.New(openai.Config{BaseURL: hs.URL + "/v1", Model: "judge", HTTPClient: &http.Client{Transport: tr}})
				sc, err := llm.NewScorer(llm.NewJudge(be, llm.JudgeOptions{MaxRetries: cfg.Scoring.OpenAI.MaxRetries}),
					llm.ScorerOptions{Metrics: []string{score.RubricRelevance, score.RubricCompleteness, score.RubricAccuracy}})
				if err != nil {
					b.Fatal(err)
				}
				scorers = []score.Scorer{sc}
			}
			reg := prometheus.NewRegistry()
			set := settingsFor(cfg, js, reg, slog.New(slog.DiscardHandler))
			set.Scorers = scorers
			rt := NewRuntime(set)
			if err := rt.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := rt.Shutdown(ctx); err != nil {
					b.Error(err)
				}
			}()
			stream, err := js.Stream(context.Background(), cfg.Scoring.Queue.Stream)
			if err != nil {
				b.Fatal(err)
			}
			// Trace ids unique across the benchmark's runs, the low bits random as W3C sampling
			// wants; one new record per op, as the assembler makes.
			seed := uint64(time.Now().UnixNano())
			tmpl := record.Record{Service: "chat", Time: time.Now(), Query: "what is the refund window?", Answer: answer, Documents: docs}
			var id [16]byte
			binary.BigEndian.PutUint64(id[:8], seed)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			stop := benchcpu.Report(b)
			for i := 0; i < b.N; i++ {
				binary.BigEndian.PutUint64(id[8:], uint64(i)*0x9e3779b97f4a7c15)
				r := tmpl
				r.TraceID = hex.EncodeToString(id[:])
				if err := rt.Stage.ConsumeRecord(ctx, &r); err != nil {
					b.Fatal(err)
				}
			}
			sampled := testutil.Sum(b, reg, "ragwatch_sampled_total", nil)
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
				info, err := stream.Info(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if float64(info.State.LastSeq) >= sampled {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%d of %.0f sampled records queued after a minute", info.State.LastSeq, sampled)
				}
			}
			stop()
			b.StopTimer()
			if d := testutil.Sum(b, reg, "ragwatch_scoring_dropped_total", nil); d > 0 {
				b.Fatalf("%.0f sampled records dropped", d)
			}
			b.ReportMetric(float64(j.requests.Load())/time.Since(start).Seconds(), "judge-calls/s")
		})
	}
}
