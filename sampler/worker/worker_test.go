package worker

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

func shutdown(t *testing.T, p *Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func assertOnce(t *testing.T, keys []string, tallies ...*tally) {
	t.Helper()
	total := map[string]int{}
	for _, tl := range tallies {
		for k, n := range tl.snapshot() {
			total[k] += n
		}
	}
	if len(total) != len(keys) {
		t.Fatalf("%d records scored, want %d", len(total), len(keys))
	}
	for _, k := range keys {
		if total[k] != 1 {
			t.Fatalf("record %s scored %d times, want exactly once", k, total[k])
		}
	}
}

func TestPoolScoresEveryRecordOnceAndPublishes(t *testing.T) {
	s := testutil.RunJetStream(t)
	nc, js := testutil.Connect(t, s)
	rt := testRuntime(4)
	keys := enqueue(t, js, rt.Queue, 50, 0.25)

	// The alert engine's side: results arrive through the scores subjects.
	subConn, _ := testutil.Connect(t, s)
	viaNATS := newTally()
	sub, err := queue.SubscribeScores(subConn, rt.Queue.ScoresSubjectPrefix, viaNATS,
		queue.ScoreChecks{MaxWeight: func() float64 { return 4 }}, prometheus.NewRegistry(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	reg := prometheus.NewRegistry()
	direct := newTally()
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	opts := testOptions(reg)
	opts.Now = func() time.Time { return fixed }
	p := New(js, rt, []score.Scorer{okScorer}, score.Fanout{queue.NewScorePublisher(nc, rt.Queue.ScoresSubjectPrefix), direct}, opts)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "every record scored and published", func() bool { return viaNATS.len() == 50 })
	shutdown(t, p)
	assertOnce(t, keys, direct)
	assertOnce(t, keys, viaNATS)
	want := score.Result{TraceID: keys[0], Service: "chat", Metric: "faithfulness", Value: 0.5, Weight: 4, Scorer: "test", Time: fixed}
	found := false
	for _, r := range viaNATS.all {
		if r.TraceID == keys[0] {
			found = r == want
			if !found {
				t.Fatalf("result %+v, want %+v", r, want)
			}
		}
	}
	if !found {
		t.Fatal("no result for the first record")
	}
	if n := promtestutil.CollectAndCount(reg, "ragwatch_eval_score"); n != 1 {
		t.Fatalf("%d eval_score series", n)
	}
	exp := `
# HELP ragwatch_scoring_attempts_total Scorer calls, by scorer and outcome (ok, timeout, rate_limited, parse_error, refused, error, invalid_result).
# TYPE ragwatch_scoring_attempts_total counter
ragwatch_scoring_attempts_total{outcome="ok",scorer="test"} 50
# HELP ragwatch_scoring_queue_depth Messages in the scoring stream (waiting or being scored), as last polled: a record each, or a batch of up to scoring.queue.batch_records.
# TYPE ragwatch_scoring_queue_depth gauge
ragwatch_scoring_queue_depth 0
`
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "acks to empty the stream", func() bool { return streamMsgs(js, rt.Queue.Stream) == 0 })
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(exp), "ragwatch_scoring_attempts_total"); err != nil {
		t.Fatal(err)
	}
	h := testutil.Series(t, reg, "ragwatch_eval_score", map[string]string{"service": "chat", "metric": "faithfulness"}).GetHistogram()
	if h.GetSampleCount() != 50 || h.GetSampleSum() != 25 {
		t.Fatalf("eval_score count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	// Turns 0..6 in turn: the 8 records of turn 0 are in no bucket.
	for bucket, n := range map[string]uint64{"1": 7, "2": 7, "3-5": 21, "6+": 7} {
		h := testutil.Series(t, reg, "ragwatch_eval_score_by_turn", map[string]string{"service": "chat", "metric": "faithfulness", "turn_bucket": bucket}).GetHistogram()
		if h.GetSampleCount() != n || h.GetSampleSum() != float64(n)/2 {
			t.Errorf("eval_score_by_turn{turn_bucket=%q} count %d sum %v, want %d %v", bucket, h.GetSampleCount(), h.GetSampleSum(), n, float64(n)/2)
		}
	}
	if n := promtestutil.CollectAndCount(reg, "ragwatch_eval_score_by_turn"); n != 4 {
		t.Errorf("%d eval_score_by_turn series, want 4", n)
	}
	turns := map[int]int{}
	for _, r := range direct.all {
		turns[r.Turn]++
	}
	if turns[0] != 8 || turns[3] != 7 || turns[6] != 7 {
		t.Errorf("results by turn %v, want the records' turns", turns)
	}
	// Weighted by 1/p = 4: Σw·x = 50·4·0.5, Σw = 50·4, whose ratio is the traffic's mean.
	sel := map[string]string{"service": "chat", "metric": "faithfulness"}
	if wx, w := testutil.Series(t, reg, "ragwatch_eval_score_weighted_sum_total", sel).GetCounter().GetValue(),
		testutil.Series(t, reg, "ragwatch_eval_score_weight_total", sel).GetCounter().GetValue(); wx != 100 || w != 200 {
		t.Fatalf("weighted sum %v, weight %v; want 100, 200", wx, w)
	}
}

// A worker process dies with records in flight (its connection closes without acks), the NATS
// server restarts from the same store, and a new worker finishes: every record is scored
// exactly once.
func TestKilledWorkerRecordsAreScoredOnceAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s1 := testutil.RunJetStream(t, testutil.StoreDir(dir))
	_, js0 := testutil.Connect(t, s1)
	rt := testRuntime(4)
	keys := enqueue(t, js0, rt.Queue, 50, 1)

	ncA, jsA := testutil.Connect(t, s1)
	var calls, blocked atomic.Int32
	scorerA := funcScorer{name: "test", score: func(ctx context.Context, r *record.Record) ([]score.Result, error) {
		if calls.Add(1) <= 10 {
			return []score.Result{{Metric: "faithfulness", Value: 1}}, nil
		}
		blocked.Add(1)
		<-ctx.Done() // stuck mid-score until the process "dies"
		return nil, ctx.Err()
	}}
	tallyA := newTally()
	poolA := New(jsA, rt, []score.Scorer{scorerA}, tallyA, testOptions(prometheus.NewRegistry()))
	if err := poolA.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "ten records scored and four in flight", func() bool { return tallyA.len() == 10 && blocked.Load() == 4 })
	// The acks are plain ones (no confirmation): a record is handed on before its ack is sent,
	// and the server takes it off the work queue when the ack arrives. Only records whose acks
	// the server recorded are done; one whose ack the kill lost is scored again (at-least-once),
	// so the kill waits for the ten.
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the ten acks recorded", func() bool { return streamMsgs(js0, rt.Queue.Stream) == 40 })

	// kill: the connection goes away without acks, then NATS restarts from its store.
	ncA.Close()
	s1.Shutdown()
	s1.WaitForShutdown()
	shutdown(t, poolA)

	s2 := testutil.RunJetStream(t, testutil.StoreDir(dir))
	_, jsB := testutil.Connect(t, s2)
	tallyB := newTally()
	poolB := New(jsB, rt, []score.Scorer{okScorer}, tallyB, testOptions(prometheus.NewRegistry()))
	if err := poolB.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 15*time.Second, 5*time.Millisecond, "the rest scored after restart", func() bool { return tallyA.len()+tallyB.len() >= 50 })
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the stream to empty", func() bool { return streamMsgs(jsB, rt.Queue.Stream) == 0 })
	shutdown(t, poolB)
	if tallyB.len() != 40 {
		t.Fatalf("after restart %d records scored, want 40", tallyB.len())
	}
	assertOnce(t, keys, tallyA, tallyB)
}

func TestTwoPoolsShareTheQueue(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := testRuntime(2)
	keys := enqueue(t, js, rt.Queue, 200, 1)
	slow := funcScorer{name: "test", score: func(context.Context, *record.Record) ([]score.Result, error) {
		time.Sleep(2 * time.Millisecond) // a judge call's worth of work, so both pools get some
		return []score.Result{{Metric: "faithfulness", Value: 1}}, nil
	}}
	var pools []*Pool
	var tallies []*tally
	for i := 0; i < 2; i++ { // two `ragwatch worker` processes: separate connections and registries
		_, jsI := testutil.Connect(t, s)
		tl := newTally()
		p := New(jsI, rt, []score.Scorer{slow}, tl, testOptions(prometheus.NewRegistry()))
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		pools, tallies = append(pools, p), append(tallies, tl)
	}
	testutil.Eventually(t, 15*time.Second, 5*time.Millisecond, "all records scored", func() bool { return tallies[0].len()+tallies[1].len() >= 200 })
	for _, p := range pools {
		shutdown(t, p)
	}
	assertOnce(t, keys, tallies...)
	if tallies[0].len() == 0 || tallies[1].len() == 0 {
		t.Fatalf("work split %d/%d: both workers must score", tallies[0].len(), tallies[1].len())
	}
	t.Logf("split %d/%d", tallies[0].len(), tallies[1].len())
}

// TestDeadLetterAfterThreeFailures: a record that fails every attempt goes to the dead-letter
// stream as JSON, whichever encoding it was queued in.
func TestDeadLetterAfterThreeFailures(t *testing.T) {
	for _, enc := range []string{queue.EncodingBinary, queue.EncodingJSON} {
		t.Run(enc, func(t *testing.T) {
			s := testutil.RunJetStream(t)
			_, js := testutil.Connect(t, s)
			rt := testRuntime(2)
			rt.Queue.Encoding = enc
			keys := enqueue(t, js, rt.Queue, 5, 1)
			queued, err := js.Stream(context.Background(), rt.Queue.Stream)
			if err != nil {
				t.Fatal(err)
			}
			if m, err := queued.GetMsg(context.Background(), 1); err != nil || queue.IsBinaryRecord(m.Data) != (enc == queue.EncodingBinary) {
				t.Fatalf("queued %v (%v), want encoding %s", m, err, enc)
			}
			poison := keys[2]
			scorer := funcScorer{name: "test", score: func(_ context.Context, r *record.Record) ([]score.Result, error) {
				if r.TraceID == poison {
					r.Query = "changed by the attempt" // the dead letter is the record as queued
					return nil, errBackend
				}
				return []score.Result{{Metric: "faithfulness", Value: 1}}, nil
			}}
			reg := prometheus.NewRegistry()
			tl := newTally()
			p := New(js, rt, []score.Scorer{scorer}, tl, testOptions(reg))
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the poison record dead-lettered", func() bool { return streamMsgs(js, rt.Queue.DeadLetterStream) == 1 })
			testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the queue to empty", func() bool { return streamMsgs(js, rt.Queue.Stream) == 0 })
			shutdown(t, p)

			if tl.len() != 4 || tl.snapshot()[poison] != 0 {
				t.Fatalf("scored %v", tl.snapshot())
			}
			m := deadLetterMsg(t, js, rt.Queue, 1)
			var rec record.Record
			if err := json.Unmarshal(m.Data, &rec); err != nil || rec.TraceID != poison || rec.Query != "q" {
				t.Fatalf("dead letter %s (%v)", m.Data, err)
			}
			if m.Subject != "ragwatch.scoring.dead" || m.Header.Get(HeaderDeliveries) != "3" || m.Header.Get(HeaderError) != "test: backend down" {
				t.Fatalf("dead letter subject %s headers %v", m.Subject, m.Header)
			}
			exp := `
	# HELP ragwatch_scoring_attempts_total Scorer calls, by scorer and outcome (ok, timeout, rate_limited, parse_error, refused, error, invalid_result).
	# TYPE ragwatch_scoring_attempts_total counter
	ragwatch_scoring_attempts_total{outcome="error",scorer="test"} 3
	ragwatch_scoring_attempts_total{outcome="ok",scorer="test"} 4
	# HELP ragwatch_scoring_dead_letter_total Records moved to the dead-letter subject after failing max_deliver times.
	# TYPE ragwatch_scoring_dead_letter_total counter
	ragwatch_scoring_dead_letter_total 1
	`
			if err := promtestutil.GatherAndCompare(reg, strings.NewReader(exp), "ragwatch_scoring_attempts_total", "ragwatch_scoring_dead_letter_total"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCostTokensBudgetAndPartialFailures(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := testRuntime(1)
	keys := enqueue(t, js, rt.Queue, 2, 0.5)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	budget := decide.NewBudget(config.SamplingBudget{USDPerDay: 10, Prices: map[string]config.ModelPrice{
		"judge": {InputPerMTok: 1, OutputPerMTok: 4},
	}}, func() time.Time { return now }, reg, quiet)
	var attempts atomic.Int32
	judge := funcScorer{name: "judge", score: func(_ context.Context, r *record.Record) ([]score.Result, error) {
		res := []score.Result{{Metric: "faithfulness", Value: 0.8, Model: "judge", InputTokens: 1_000_000, OutputTokens: 250_000}}
		switch {
		case r.TraceID == keys[0] && attempts.Add(1) == 1:
			// First attempt: one metric timed out: retried, its partial result not handed on.
			return res, score.Failure{{Metric: "answer_relevancy", Outcome: score.OutcomeTimeout}}
		case r.TraceID == keys[1]:
			// Refused is final: the partial result stands.
			return res, score.Failure{{Metric: "answer_relevancy", Outcome: score.OutcomeRefused}}
		}
		return res, nil
	}}
	invalid := funcScorer{name: "broken", score: func(context.Context, *record.Record) ([]score.Result, error) {
		return []score.Result{{Metric: "x", Value: 1.5}}, nil
	}}
	tl := newTally()
	opts := testOptions(reg)
	opts.Budget = budget
	p := New(js, rt, []score.Scorer{judge, invalid}, tl, opts)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "both records scored", func() bool { return tl.len() == 2 })
	shutdown(t, p)
	assertOnce(t, keys, tl)
	for _, r := range tl.all {
		if r.CostUSD != 2 || r.Weight != 2 || r.Scorer != "judge" {
			t.Fatalf("result %+v: want cost 2 (1M in at $1 + 250k out at $4), weight 2", r)
		}
	}
	// Three judge calls (one retried) at $2 each.
	if spent := budget.Spent(); math.Abs(spent-6) > 1e-9 {
		t.Fatalf("budget spent %v, want 6", spent)
	}
	exp := `
# HELP ragwatch_scoring_attempts_total Scorer calls, by scorer and outcome (ok, timeout, rate_limited, parse_error, refused, error, invalid_result).
# TYPE ragwatch_scoring_attempts_total counter
ragwatch_scoring_attempts_total{outcome="invalid_result",scorer="broken"} 3
ragwatch_scoring_attempts_total{outcome="ok",scorer="broken"} 3
ragwatch_scoring_attempts_total{outcome="ok",scorer="judge"} 1
ragwatch_scoring_attempts_total{outcome="refused",scorer="judge"} 1
ragwatch_scoring_attempts_total{outcome="timeout",scorer="judge"} 1
# HELP ragwatch_scoring_cost_usd_total What scoring spent in US dollars, by judge model (priced from sampling.budget.prices, else as the scorer reported).
# TYPE ragwatch_scoring_cost_usd_total counter
ragwatch_scoring_cost_usd_total{model="judge"} 6
# HELP ragwatch_scoring_tokens_total Tokens used by scoring, by judge model and direction (input, output).
# TYPE ragwatch_scoring_tokens_total counter
ragwatch_scoring_tokens_total{direction="input",model="judge"} 3e+06
ragwatch_scoring_tokens_total{direction="output",model="judge"} 750000
# HELP ragwatch_sampling_budget_remaining_usd Scoring budget left for the current UTC day in US dollars (+Inf without a budget).
# TYPE ragwatch_sampling_budget_remaining_usd gauge
ragwatch_sampling_budget_remaining_usd 4
`
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(exp), "ragwatch_scoring_attempts_total", "ragwatch_scoring_cost_usd_total",
		"ragwatch_scoring_tokens_total", "ragwatch_sampling_budget_remaining_usd"); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownWithoutStartAndTwice(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	p := New(js, testRuntime(1), nil, nil, testOptions(prometheus.NewRegistry()))
	shutdown(t, p)
	shutdown(t, p)
	if err := p.Start(context.Background()); err != nil { // after Shutdown: a no-op
		t.Fatal(err)
	}
	p2 := New(js, testRuntime(1), nil, nil, testOptions(prometheus.NewRegistry()))
	if err := p2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	shutdown(t, p2)
	shutdown(t, p2)
}

// A record whose worker died mid-score on its last allowed attempt comes back once more and is
// dead-lettered without scoring, so a record that kills workers cannot kill them forever.
func TestUnfinishedLastAttemptIsDeadLettered(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := testRuntime(1)
	rt.Queue.MaxDeliver = 1
	keys := enqueue(t, js, rt.Queue, 1, 1)

	ncA, jsA := testutil.Connect(t, s)
	var started atomic.Int32
	hang := funcScorer{name: "test", score: func(ctx context.Context, _ *record.Record) ([]score.Result, error) {
		started.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	poolA := New(jsA, rt, []score.Scorer{hang}, newTally(), testOptions(prometheus.NewRegistry()))
	if err := poolA.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the record in flight", func() bool { return started.Load() == 1 })
	ncA.Close() // the worker dies
	shutdown(t, poolA)

	reg := prometheus.NewRegistry()
	var scored atomic.Int32
	counting := funcScorer{name: "test", score: func(context.Context, *record.Record) ([]score.Result, error) {
		scored.Add(1)
		return []score.Result{{Metric: "faithfulness", Value: 1}}, nil
	}}
	poolB := New(js, rt, []score.Scorer{counting}, newTally(), testOptions(reg))
	if err := poolB.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the dead letter", func() bool { return streamMsgs(js, rt.Queue.DeadLetterStream) == 1 })
	shutdown(t, poolB)
	if scored.Load() != 0 {
		t.Fatal("the record was scored after its last attempt")
	}
	m := deadLetterMsg(t, js, rt.Queue, 1)
	if m.Header.Get(HeaderDeliveries) != "2" || !strings.HasPrefix(m.Header.Get(HeaderError), "attempts did not finish") ||
		m.Header.Get("Nats-Msg-Id") != keys[0] {
		t.Fatalf("dead letter headers %v", m.Header)
	}
	if got := promtestutil.ToFloat64(queue.NewMetrics(reg).DeadLetter); got != 1 {
		t.Fatalf("dead letters %v", got)
	}
}

// Every scorer's valid results reach the sink in one delivery per record, each carrying the
// record's ids and weight and its scorer's name; an invalid one is dropped between them.
func TestResultsOfEveryScorer(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := testRuntime(1)
	keys := enqueue(t, js, rt.Queue, 3, 0.25)
	one := func(name, metric string, v float64) funcScorer {
		return funcScorer{name: name, score: func(context.Context, *record.Record) ([]score.Result, error) {
			return []score.Result{{Metric: "x", Value: 2}, {Metric: metric, Value: v}}, nil
		}}
	}
	tl := newTally()
	p := New(js, rt, []score.Scorer{one("first", "faithfulness", 0.25), one("second", "answer_relevancy", 0.75)}, tl, testOptions(prometheus.NewRegistry()))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "every record scored", func() bool { return tl.len() == len(keys) })
	shutdown(t, p)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.all) != 2*len(keys) {
		t.Fatalf("%d results, want %d: %+v", len(tl.all), 2*len(keys), tl.all)
	}
	for i := 0; i < len(tl.all); i += 2 {
		a, b := tl.all[i], tl.all[i+1]
		if a.Scorer != "first" || a.Metric != "faithfulness" || a.Value != 0.25 ||
			b.Scorer != "second" || b.Metric != "answer_relevancy" || b.Value != 0.75 {
			t.Fatalf("results %d and %d: %+v, %+v", i, i+1, a, b)
		}
		if a.TraceID == "" || a.TraceID != b.TraceID || a.Weight != 4 || b.Weight != 4 || a.Time.IsZero() || b.Time.IsZero() {
			t.Fatalf("results %d and %d lack their record's ids, weight 4 or time: %+v, %+v", i, i+1, a, b)
		}
	}
}

// calibrateFunc adapts a function to Calibrator.
type calibrateFunc func([]score.Result)

func (f calibrateFunc) Calibrate(r []score.Result) { f(r) }

// The Calibrator maps results before they are counted and handed on: the eval-score histogram
// and the sink see the published value, the result keeps the raw one.
func TestCalibratorMapsResultsBeforeTheyAreHandedOn(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := testRuntime(1)
	keys := enqueue(t, js, rt.Queue, 2, 1)
	builtin := funcScorer{name: "builtin", score: func(context.Context, *record.Record) ([]score.Result, error) {
		return []score.Result{{Metric: "faithfulness", Value: 0.2}}, nil
	}}
	var seen []string
	var mu sync.Mutex
	cal := calibrateFunc(func(res []score.Result) {
		mu.Lock()
		defer mu.Unlock()
		for i := range res {
			x := &res[i]
			seen = append(seen, x.Service+"/"+x.Scorer)
			raw := x.Value
			x.Raw, x.Value, x.Calibration = &raw, 0.6, 7
		}
	})
	reg := prometheus.NewRegistry()
	o := testOptions(reg)
	o.Calibrator = cal
	tl := newTally()
	p := New(js, rt, []score.Scorer{builtin}, tl, o)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "every record scored", func() bool { return tl.len() == len(keys) })
	shutdown(t, p)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, x := range tl.all {
		if x.Value != 0.6 || x.Raw == nil || *x.Raw != 0.2 || x.Calibration != 7 {
			t.Errorf("handed on %+v", x)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "chat/builtin" {
		t.Errorf("calibrator saw %v: results must carry their service and scorer", seen)
	}
	if got := promtestutil.ToFloat64(p.m.evalWX.WithLabelValues("chat", "", "faithfulness")); math.Abs(got-1.2) > 1e-9 {
		t.Errorf("weighted eval-score sum %v, want 1.2 (two published 0.6)", got)
	}
}
