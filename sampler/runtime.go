package sampler

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
	"github.com/ragwatch/ragwatch/sampler/queue"
	scorersbuild "github.com/ragwatch/ragwatch/sampler/scorers"
	"github.com/ragwatch/ragwatch/sampler/worker"
)

// Runtime is everything `ragwatch run` needs for sampling and scoring, built from the config:
// the Stage (a record.Consumer and record.FeedbackConsumer for the pipeline), the publisher
// feeding the JetStream queue, the budget, and, unless scoring.workers is 0, the in-process
// worker pool. Results are published on ragwatch.scores.<service>; the alert engine reads them
// with queue.SubscribeScores, as it would from worker pods.
//
// The budget is charged by the in-process workers; with scoring.workers 0 and a budget, it is
// charged from the costs the worker pods publish on the scores subjects instead.
type Runtime struct {
	Stage     *Stage
	Decider   *decide.Decider
	Budget    *decide.Budget
	Publisher *queue.Publisher
	Pool      *worker.Pool // nil when scoring.workers is 0 (worker pods score)
	// Pairs is the record.PairConsumer of the shadow-pair join: it queues pair jobs on the
	// same stream. Pairwise counts the outcomes the in-process workers judge and serves
	// GET /api/v1/pairwise.
	Pairs    *PairStage
	Pairwise *pairwise.WinRates

	js       jetstream.JetStream
	cfg      config.ScoringQueue
	replicas int
	logger   *slog.Logger
	reg      prometheus.Registerer
	// budgetSub feeds the budget from ragwatch.scores.> when worker pods do the scoring.
	budgetSub *nats.Subscription
	// stop ends the loop that queues records whose answer did not come (Stage.Sweep); wg
	// tracks it.
	stop chan struct{}
	wg   sync.WaitGroup
}

// Settings is what NewRuntime builds the sampler from, as every pipeline component takes
// one struct (collector/signals, collector/join, ...): its config sections, the JetStream
// context, the scorers, and the process's shared services and telemetry.
type Settings struct {
	Sampling    config.Sampling
	Scoring     config.Scoring
	Comparisons []config.Comparison
	// Variants bounds the `variant` label of the scores (variants.max_values); VariantTTL
	// (signals.service_ttl) frees the label of a variant not seen for that long.
	Variants   config.Variants
	VariantTTL time.Duration

	JS       jetstream.JetStream
	Replicas int // of the streams queue.Setup creates
	// Scorers are what in-process workers run. Extra (may be nil) also receives every result
	// in process (e.g. the /api/v1/scores ring).
	Scorers []score.Scorer
	Extra   score.Consumer
	// PairJudge judges the pair jobs in-process workers take (pairs.judge); nil dead-letters
	// them.
	PairJudge pairwise.Judge
	// Calibrator maps in-process workers' builtin results with the service's calibration maps
	// (labelcal.Learner); nil maps nothing.
	Calibrator worker.Calibrator
	// ScoresLoopback, when set, hands the results this process publishes (its workers' and
	// the stage's retrieval metrics) to the consumer of its own scores subscription directly
	// (queue.Loopback): it must be the one that subscription was given.
	ScoresLoopback *queue.Loopback

	// Services bounds the `service` label and should be the process's shared set (nil: a set
	// of 50).
	Services   *cardinality.ServiceSet
	Registerer prometheus.Registerer
	Logger     *slog.Logger // nil: slog.Default()
}

// NewRuntime wires the sampler.
func NewRuntime(s Settings) *Runtime {
	js, reg, logger, services := s.JS, s.Registerer, s.Logger, s.Services
	if logger == nil {
		logger = slog.Default()
	}
	if services == nil {
		services = cardinality.NewServiceSet(50)
	}
	budget := decide.NewBudget(s.Sampling.Budget, nil, reg, logger)
	d := decide.New(s.Sampling, budget, services, nil, reg)
	pub := queue.NewPublisher(js, s.Scoring.Queue, s.Sampling.Buffer, reg, logger)
	rt := &Runtime{
		Stage:     NewStage(d, pub, s.Sampling.Recent, nil),
		Decider:   d,
		Budget:    budget,
		Publisher: pub,
		Pairs:     NewPairStage(s.Comparisons, d, budget, pub, reg),
		Pairwise:  pairwise.NewWinRates(reg),
		js:        js, cfg: s.Scoring.Queue, replicas: s.Replicas, logger: logger, reg: reg,
	}
	if reg != nil {
		if err := rt.Stage.Register(reg); err != nil {
			logger.Error("late content will not be counted", "error", err)
		}
	}
	sink := score.Fanout{queue.NewScorePublisher(js.Conn(), s.Scoring.Queue.ScoresSubjectPrefix).WithLoopback(s.ScoresLoopback)}
	if s.Extra != nil {
		sink = append(sink, s.Extra)
	}
	// One bounded set of variant labels for the scores of this process, in the stage and workers.
	variants := cardinality.NewVariantSet(s.Variants.MaxValues, s.VariantTTL, nil)
	// The retrieval metrics run in the stage on every record with relevance labels, not on the
	// sampled fraction the workers see.
	if rs := scorersbuild.Retrieval(s.Scoring.ScoringEngine); rs != nil {
		if reg == nil {
			reg = prometheus.NewRegistry()
		}
		hist := worker.EvalScore(reg)
		services.OnEvict(func(service string) { hist.DeletePartialMatch(prometheus.Labels{"service": service}) })
		variants.OnEvict(func(variant string) { hist.DeletePartialMatch(prometheus.Labels{"variant": variant}) })
		observed := score.ConsumerFunc(func(ctx context.Context, res []score.Result) error {
			for _, x := range res {
				variant, _ := variants.Label(x.Variant)
				hist.WithLabelValues(services.Label(x.Service), variant, x.Metric).Observe(x.Value)
			}
			return sink.ConsumeScores(ctx, res)
		})
		rt.Stage.ScoreAlways(rs, observed)
		// Relevance labels arriving after their record: scored against its ranking, kept for
		// the last sampling.recent.max_records records with documents.
		if err := rt.Stage.KeepRankings(s.Sampling.Recent.MaxRecords, reg); err != nil {
			logger.Error("late relevance labels will not be scored", "error", err)
		}
	}
	scorers := SampledScorers(s.Scorers)
	if s.Scoring.Workers > 0 {
		rt.Pool = worker.New(js, s.Scoring.ScoringRuntime, scorers, sink, worker.Options{
			Replicas: s.Replicas, Budget: budget, Services: services, Registerer: reg, Logger: logger,
			PairJudge: s.PairJudge, Pairwise: rt.Pairwise,
			Variants: variants, Calibrator: s.Calibrator,
		})
	}
	return rt
}

// Start creates the queue (bounded by ctx) and starts the publisher and the workers.
func (r *Runtime) Start(ctx context.Context) error {
	if _, err := queue.Setup(ctx, r.js, r.cfg, r.replicas); err != nil {
		return err
	}
	if err := r.Publisher.Start(ctx); err != nil {
		return errors.Join(err, r.Shutdown(ctx))
	}
	if r.stop == nil {
		r.stop = make(chan struct{})
		r.wg.Add(1)
		go r.sweep(r.stop)
	}
	if r.Pool != nil {
		if err := r.Pool.Start(ctx); err != nil {
			return errors.Join(err, r.Shutdown(ctx))
		}
	} else if r.Budget.Limited() {
		// Worker pods spend; their results carry the cost. Charge it here so sampling stops.
		sub, err := queue.SubscribeScores(r.js.Conn(), r.cfg.ScoresSubjectPrefix, r.Budget,
			queue.ScoreChecks{MaxWeight: r.Decider.MaxWeight}, r.reg, r.logger)
		if err != nil {
			return errors.Join(err, r.Shutdown(ctx))
		}
		r.budgetSub = sub
	}
	return nil
}

// Shutdown flushes the publisher (records already sampled reach the durable queue), then stops
// the workers; records they were scoring go back to the queue. Call it after the receivers
// stopped and before the NATS connection closes. Idempotent and safe without Start.
func (r *Runtime) Shutdown(ctx context.Context) error {
	if r.stop != nil {
		close(r.stop)
		r.wg.Wait()
		r.stop = nil
	}
	r.Stage.Sweep(true) // records still awaiting their answer are queued as they are
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := r.Publisher.Shutdown(pctx)
	cancel()
	if r.Pool != nil {
		err = errors.Join(err, r.Pool.Shutdown(ctx))
	}
	if r.budgetSub != nil {
		err = errors.Join(err, r.budgetSub.Unsubscribe())
		r.budgetSub = nil
	}
	return err
}

// sweep queues, every second, the sampled records whose answer did not come within
// sampling.recent.answer_wait (Stage.Sweep).
func (r *Runtime) sweep(stop <-chan struct{}) {
	defer r.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.Stage.Sweep(false)
		}
	}
}
