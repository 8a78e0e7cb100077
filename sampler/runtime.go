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
	"github.com/ragwatch/ragwatch/internal/labels"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/queue"
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
	services *labels.ServiceSet, reg prometheus.Registerer, logger *slog.Logger) *Runtime {
	if logger == nil {
		logger = slog.Default()
	}
	budget := decide.NewBudget(cfg.Sampling.Budget, nil, reg, logger)
	d := decide.New(cfg.Sampling, budget, services, nil, reg)
	pub := queue.NewPublisher(js, cfg.Scoring.Queue, cfg.Sampling.Buffer, reg, logger)
	rt := &Runtime{
		Stage:     NewStage(d, pub, cfg.Sampling.Recent, nil),
		Decider:   d,
		Budget:    budget,
		Publisher: pub,
		js:        js, cfg: cfg.Scoring.Queue, replicas: replicas, logger: logger, reg: reg,
	}
	if cfg.Scoring.Workers > 0 {
		sink := score.Fanout{queue.NewScorePublisher(js.Conn(), cfg.Scoring.Queue.ScoresSubjectPrefix)}
		if extra != nil {
			sink = append(sink, extra)
		}
		rt.Pool = worker.New(js, cfg.Scoring.ScoringRuntime, scorers, sink, worker.Options{
			Replicas: replicas, Budget: budget, Services: services, Registerer: reg, Logger: logger,
			Variants: labels.NewVariantSet(cfg.Variants.MaxValues, cfg.Signals.ServiceTTL, nil),
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
