package sampler

import (
	"context"
	"errors"
	"log/slog"
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
}

// NewRuntime wires the sampler for cfg. scorers are what in-process workers run; extra (may be
// nil) also receives every result in process (e.g. the /api/v1/scores ring). services bounds
// the `service` label and should be the process's shared set.
func NewRuntime(cfg *config.Config, js jetstream.JetStream, replicas int, scorers []score.Scorer, extra score.Consumer,
	services *cardinality.ServiceSet, reg prometheus.Registerer, logger *slog.Logger, opts ...RuntimeOption) *Runtime {
	var ro runtimeOptions
	for _, o := range opts {
		o(&ro)
	}
	if logger == nil {
		logger = slog.Default()
	}
	if services == nil {
		services = cardinality.NewServiceSet(50)
	}
	budget := decide.NewBudget(cfg.Sampling.Budget, nil, reg, logger)
	d := decide.New(cfg.Sampling, budget, services, nil, reg)
	pub := queue.NewPublisher(js, cfg.Scoring.Queue, cfg.Sampling.Buffer, reg, logger)
	rt := &Runtime{
		Stage:     NewStage(d, pub, cfg.Sampling.Recent, nil),
		Decider:   d,
		Budget:    budget,
		Publisher: pub,
		Pairs:     NewPairStage(cfg.Comparisons, d, budget, pub, reg),
		Pairwise:  pairwise.NewWinRates(reg),
		js:        js, cfg: cfg.Scoring.Queue, replicas: replicas, logger: logger, reg: reg,
	}
	sink := score.Fanout{queue.NewScorePublisher(js.Conn(), cfg.Scoring.Queue.ScoresSubjectPrefix).WithLoopback(ro.loopback)}
	if extra != nil {
		sink = append(sink, extra)
	}
	// One bounded set of variant labels for the scores of this process, in the stage and workers.
	variants := cardinality.NewVariantSet(cfg.Variants.MaxValues, cfg.Signals.ServiceTTL, nil)
	// The retrieval metrics run in the stage on every record with relevance labels, not on the
	// sampled fraction the workers see.
	if rs := scorersbuild.Retrieval(cfg.Scoring.ScoringEngine); rs != nil {
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
	}
	scorers = SampledScorers(scorers)
	if cfg.Scoring.Workers > 0 {
		rt.Pool = worker.New(js, cfg.Scoring.ScoringRuntime, scorers, sink, worker.Options{
			Replicas: replicas, Budget: budget, Services: services, Registerer: reg, Logger: logger,
			PairJudge: ro.pairJudge, Pairwise: rt.Pairwise,
			Variants: variants,
		})
	}
	return rt
}

// RuntimeOption adjusts NewRuntime.
type RuntimeOption func(*runtimeOptions)

type runtimeOptions struct {
	pairJudge pairwise.Judge
	loopback  *queue.Loopback
}

// WithScoresLoopback hands the results this process publishes (its workers' and the stage's
// retrieval metrics) to the consumer of its own scores subscription directly
// (queue.Loopback): l must be the one that subscription was given.
func WithScoresLoopback(l *queue.Loopback) RuntimeOption {
	return func(o *runtimeOptions) { o.loopback = l }
}

// WithPairJudge gives the in-process workers the judge of pair jobs (pairs.judge); without it
// they dead-letter pair jobs.
func WithPairJudge(j pairwise.Judge) RuntimeOption {
	return func(o *runtimeOptions) { o.pairJudge = j }
}

// Start creates the queue (bounded by ctx) and starts the publisher and the workers.
func (r *Runtime) Start(ctx context.Context) error {
	if _, err := queue.Setup(ctx, r.js, r.cfg, r.replicas); err != nil {
		return err
	}
	if err := r.Publisher.Start(ctx); err != nil {
		return errors.Join(err, r.Shutdown(ctx))
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
