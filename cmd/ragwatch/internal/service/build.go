package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ragwatch/ragwatch/alerts/drift"
	"github.com/ragwatch/ragwatch/alerts/engine"
	"github.com/ragwatch/ragwatch/alerts/notify"
	"github.com/ragwatch/ragwatch/collector/assemble"
	"github.com/ragwatch/ragwatch/collector/httpin"
	"github.com/ragwatch/ragwatch/collector/join"
	"github.com/ragwatch/ragwatch/collector/natsin"
	"github.com/ragwatch/ragwatch/collector/otlp"
	"github.com/ragwatch/ragwatch/collector/signals"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/httpapi"
	"github.com/ragwatch/ragwatch/internal/listen"
	"github.com/ragwatch/ragwatch/internal/memlimit"
	"github.com/ragwatch/ragwatch/internal/natsconn"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/redact"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/evalexport"
	"github.com/ragwatch/ragwatch/sampler/export"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
	"github.com/ragwatch/ragwatch/sampler/queue"
	"github.com/ragwatch/ragwatch/sampler/recentscores"
	"github.com/ragwatch/ragwatch/sampler/scorers"
	"github.com/ragwatch/ragwatch/sampler/worker"
)

// builder carries what the parts of the list share while they are built: the App whose fields
// the built parts fill, and the pieces that are not components themselves.
type builder struct {
	*App
	o *options
	// ctx bounds the NATS work done while building (streams and KV buckets are created here).
	ctx context.Context

	guard *memlimit.Guard // nil in worker mode: refuseFunc then refuses nothing

	// listen and listenMetrics bound and count every listener (limits.go, listenLimits).
	listen        listen.Limits
	listenMetrics *listen.Metrics

	// The redactor cleans text before it leaves the process (security.go); built once, on
	// first use, because run and the worker both need it and neither may build two.
	redactor      *redact.Redactor
	redactorBuilt bool

	// recent is the ring behind GET /api/v1/scores; recentIn redacts what enters it.
	recent   *recentscores.Ring
	recentIn recentSink

	// export keeps recent records and their scores, redacted, for GET /api/v1/export; nil
	// unless export.enabled.
	export *export.Store
	// scoresLoop hands this process's own results to the scores subscription's consumer
	// (queue.Loopback); the sampler's publisher marks them, the subscription skips them.
	scoresLoop *queue.Loopback
	// active are the scorers the in-process workers run (nil when scoring.workers is 0); the
	// golden-set canary judges with them.
	active []score.Scorer
}

func (b *builder) logger(component string) *slog.Logger { return b.log.With("component", component) }

func (b *builder) redaction() (*redact.Redactor, error) {
	if !b.redactorBuilt {
		r, err := buildRedactor(b.cfg, b.Registry)
		if err != nil {
			return nil, err
		}
		b.redactor, b.redactorBuilt = r, true
	}
	return b.redactor, nil
}

// scorers are what the scoring workers run: those of the scoring section, with judge prompts
// and result explanations redacted.
func (b *builder) scorers() ([]score.Scorer, error) {
	r, err := b.redaction()
	if err != nil {
		return nil, err
	}
	opts := append(JudgeRedaction(r), scorers.WithJudges(b.cfg.Judges, b.Judges))
	active, err := scorers.Build(b.cfg.Scoring, b.Registry, b.logger("scorers"), opts...)
	if err != nil {
		return nil, fmt.Errorf("build scorers: %w", err)
	}
	return redactScorers(active, r), nil // explanations leave on NATS and the API
}

// pairJudge is what the scoring workers judge pair jobs with (pairs.judge), its prompts
// redacted as the scorers' are.
func (b *builder) pairJudge() (pairwise.Judge, error) {
	r, err := b.redaction()
	if err != nil {
		return nil, err
	}
	j, err := scorers.BuildPairJudge(b.cfg.Scoring, b.cfg.Pairs.Judge, b.logger("scorers"), JudgeRedaction(r)...)
	if err != nil {
		return nil, fmt.Errorf("build pairwise judge: %w", err)
	}
	return j, nil
}

// kvStream is the stream behind a JetStream KV bucket.
func kvStream(bucket string) string { return "KV_" + bucket }

func (b *builder) nats() (lifecycle, error) {
	conn, err := natsconn.Connect(b.ctx, b.cfg.NATS, b.Registry, b.logger("nats"))
	if err != nil {
		return lifecycle{}, err
	}
	b.NATS = conn
	return lifecycle{shutdown: func(context.Context) error { conn.Close(); return nil }}, nil
}

func (b *builder) memoryGuard() (lifecycle, error) {
	b.guard = newGuard(b.cfg, b.o, b.Registry)
	return lifecycle{start: b.guard.Start, shutdown: b.guard.Shutdown}, nil
}

func (b *builder) signals() (lifecycle, error) {
	sig, err := signals.New(signals.Settings{
		Signals:    b.cfg.Signals,
		Exporters:  b.cfg.Exporters,
		Services:   b.Services,
		Variants:   b.Variants,
		Registerer: b.Registry,
		Logger:     b.logger("signals"),
		Now:        b.o.now,
	})
	if err != nil {
		return lifecycle{}, fmt.Errorf("build signals: %w", err)
	}
	b.Signals = sig
	return lifecycle{start: sig.Start, shutdown: sig.Shutdown}, nil
}

func (b *builder) notifiers() (lifecycle, error) {
	disp, err := notify.New(b.cfg.Notifiers, notify.Options{
		Registerer: b.Registry, Logger: b.logger("notify"), Now: b.o.now,
	})
	if err != nil {
		return lifecycle{}, fmt.Errorf("build notifiers: %w", err)
	}
	b.Notify = disp
	return lifecycle{start: disp.Start, shutdown: disp.Shutdown}, nil
}

func (b *builder) alertEngine() (lifecycle, error) {
	var store engine.Store
	if bucket := b.cfg.Alerting.StateBucket; bucket != "" { // window state survives restarts in JetStream KV
		kv, err := b.NATS.KeyValue(b.ctx, bucket, 0, b.cfg.Alerting.StateMaxBytes)
		if err != nil {
			return lifecycle{}, err
		}
		b.NATS.Store().Watch("alerts", kvStream(bucket))
		store = engine.KVStore{KV: kv}
	}
	var baseline *drift.Baseline // the pinned drift reference, read once here
	if file := b.cfg.Drift.BaselineFile; file != "" {
		var err error
		if baseline, err = drift.LoadBaseline(file); err != nil {
			return lifecycle{}, fmt.Errorf("build alert engine: %w", err)
		}
	}
	e, err := engine.New(engine.Options{
		Sections: engine.SectionsOf(b.cfg), Registerer: b.Registry, Logger: b.logger("alerts"), Now: b.o.now,
		Sink: b.Notify, Services: b.Services, Store: store, Baseline: baseline,
	})
	if err != nil {
		return lifecycle{}, fmt.Errorf("build alert engine: %w", err)
	}
	b.Alerts = e
	return lifecycle{start: e.Start, shutdown: e.Shutdown}, nil
}

// evaluationExport builds the exporter of the evaluations section (nil when no destination is
// set). It takes the results this process scored, not those of the scores subscription: every
// sidecar on a cluster hears every worker pod's results, and each must leave once.
func (b *builder) evaluationExport() (lifecycle, error) {
	m, err := evalexport.NewMetrics(b.Registry)
	if err != nil {
		return lifecycle{}, fmt.Errorf("register evaluation export metrics: %w", err)
	}
	r, err := b.redaction()
	if err != nil {
		return lifecycle{}, err
	}
	s := evalexport.Settings{Config: b.cfg.Evaluations, Metrics: m, Logger: b.logger("evalexport"), Now: b.o.now}
	if r != nil {
		s.Redact = r.String // explanations leave the process
	}
	e, err := evalexport.New(s)
	if err != nil {
		return lifecycle{}, err
	}
	if e == nil {
		return lifecycle{}, nil
	}
	b.EvalExport = e
	return lifecycle{start: e.Start, shutdown: e.Shutdown}, nil
}

// scoresSubscription feeds ragwatch.scores.<service> (worker pods' results, and in-process
// workers' through its loopback) to the alert engine and to the ring behind GET
// /api/v1/scores, so the ring shows worker pods' scores too.
func (b *builder) scoresSubscription() (lifecycle, error) {
	r, err := b.redaction()
	if err != nil {
		return lifecycle{}, err
	}
	b.recent = recentscores.New(b.cfg.Scoring.Recent.Size, b.cfg.Scoring.Recent.IncludeContent)
	b.recentIn = redactRecent(b.recent, r) // API output: explanations and previews redacted
	var sub *nats.Subscription
	conn, cfg := b.NATS, b.cfg
	next := score.Fanout{b.Alerts, b.Agreement, b.recentIn}
	if b.cfg.Export.Enabled {
		o := export.Options{MaxRecords: b.cfg.Export.MaxRecords, MaxBytes: b.cfg.Export.MaxBytes}
		if r != nil {
			o.Redact = r.String // every text is redacted when it is exported
		}
		b.export = export.New(o)
		next = append(next, b.export)
		if bucket := b.cfg.Export.Bucket; bucket != "" { // the kept records survive restarts
			kv, err := b.NATS.KeyValue(b.ctx, bucket, 0, b.cfg.Export.BucketMaxBytes)
			if err != nil {
				return lifecycle{}, err
			}
			b.NATS.Store().Watch("export", kvStream(bucket))
			if err := b.export.Persist(export.PersistOptions{KV: kv, Logger: b.logger("export"), Registerer: b.Registry}); err != nil {
				return lifecycle{}, err
			}
		}
	}
	reg, logger := b.Registry, b.logger("scores")
	// Results come from outside the process (worker pods): a weight is valid up to 1 / the
	// smallest probability the sampler built below has used since start.
	checks := queue.ScoreChecks{Ingest: b.Ingest, MaxWeight: func() float64 { return b.Sampler.Decider.MaxWeight() }}
	// This process's own results skip the round trip through NATS and JSON, with the same
	// checks; those of worker pods and other processes arrive through the subscription.
	// Only this process's own go to the evaluation export.
	own := next
	if b.EvalExport != nil {
		own = append(slices.Clip(next), b.EvalExport)
	}
	b.scoresLoop = queue.NewLoopback(own, checks, reg, logger)
	checks.Loopback = b.scoresLoop
	exp := b.export
	return lifecycle{
		start: func(ctx context.Context) error {
			if exp != nil { // reads the kept records back before any record or score arrives
				if err := exp.Start(ctx); err != nil {
					return err
				}
			}
			s, err := queue.SubscribeScores(conn.NC, cfg.Scoring.Queue.ScoresSubjectPrefix, next, checks, reg, logger)
			sub = s
			return err
		},
		shutdown: func(ctx context.Context) error {
			var err error
			if sub != nil {
				err = sub.Unsubscribe()
			}
			if exp != nil { // writes what changed since the last flush
				err = errors.Join(err, exp.Shutdown(ctx))
			}
			return err
		},
	}, nil
}

// sampler queues a consistent sample on JetStream; in-process workers (scoring.workers; 0
// leaves scoring to `ragwatch worker` pods) publish results on ragwatch.scores.<service>, and
// hand them to the scores subscription's consumer through its loopback, checked as the
// subscription checks worker pods' results.
func (b *builder) sampler() (lifecycle, error) {
	set := sampler.Settings{
		Sampling: b.cfg.Sampling, Scoring: b.cfg.Scoring, Comparisons: b.cfg.Comparisons,
		Variants: b.cfg.Variants, VariantTTL: b.cfg.Signals.ServiceTTL,
		JS: b.NATS.JS, Replicas: b.NATS.Replicas, ScoresLoopback: b.scoresLoop,
		Services: b.Services, Registerer: b.Registry, Logger: b.logger("sampler"),
	}
	set.Calibrator = b.calibrator()
	if b.cfg.Scoring.Workers > 0 {
		var err error
		if set.Scorers, err = b.scorers(); err != nil {
			return lifecycle{}, err
		}
		if set.PairJudge, err = b.pairJudge(); err != nil {
			return lifecycle{}, err
		}
	}
	b.active = set.Scorers // the golden canary re-judges with them
	samp := sampler.NewRuntime(set)
	q := b.cfg.Scoring.Queue
	b.NATS.Store().Watch("scoring", q.Stream)
	b.NATS.Store().Watch("dead_letter", q.DeadLetterStream)
	samp.Publisher.Health = b.NATS.Store() // drops at once (storage_full) while the stream cannot write
	if b.EvalExport != nil && samp.Pool != nil {
		samp.Pool.OnPairVerdict(b.EvalExport)  // shadow pairs' verdicts, on both records
		samp.Pool.OnRecordLabels(b.EvalExport) // labels that came before their record
	}
	b.Sampler = samp
	return lifecycle{start: samp.Start, shutdown: samp.Shutdown}, nil
}

// scoringWorkers is `ragwatch worker`'s pool: the one `ragwatch run` runs in process, pulling
// from the durable consumer on the cluster the sidecars queue to and publishing the results on
// ragwatch.scores.<service>, with its own budget.
func (b *builder) scoringWorkers() (lifecycle, error) {
	active, err := b.scorers()
	if err != nil {
		return lifecycle{}, err
	}
	active = sampler.SampledScorers(active) // the sidecars' sampling stage computes retrieval metrics
	if len(active) == 0 {
		return lifecycle{}, errors.New("no scorers are enabled (scoring.metrics / scoring.retrieval_k)")
	}
	logger := b.logger("workers")
	pj, err := b.pairJudge()
	if err != nil {
		return lifecycle{}, err
	}
	sink := score.Fanout{queue.NewScorePublisher(b.NATS.NC, b.cfg.Scoring.Queue.ScoresSubjectPrefix)}
	if b.EvalExport != nil {
		sink = append(sink, b.EvalExport) // the pod that scored exports, once
	}
	pool := worker.New(b.NATS.JS, b.cfg.Scoring.ScoringRuntime, active, sink,
		worker.Options{
			Replicas:   b.NATS.Replicas,
			Budget:     decide.NewBudget(b.cfg.Sampling.Budget, nil, b.Registry, logger),
			Services:   b.Services,
			Variants:   b.Variants,
			Registerer: b.Registry,
			Logger:     logger,
			Now:        b.o.now,
			PairJudge:  pj,
			Calibrator: b.calibrator(),
		})
	if b.EvalExport != nil {
		pool.OnPairVerdict(b.EvalExport)
		pool.OnRecordLabels(b.EvalExport)
	}
	b.Workers = pool
	return lifecycle{start: pool.Start, shutdown: pool.Shutdown}, nil
}

// join puts the join in front of the record fan-out: records, feedback and labels from every
// receiver pass through it, so each feedback and label reaches the stages once, joined to its
// record; it also completes shadow pairs and gives turns their session's history.
func (b *builder) join() (lifecycle, error) {
	// Record stages, in the order each record visits them. A new stage is a part above this
	// one in the list, appended here.
	b.Records = record.Fanout{
		b.Signals,       // online signals: Prometheus, statsd, OTLP metrics
		b.Alerts,        // signal SLOs and drift
		b.Agreement,     // labels riding on the record wait for its scores
		b.Sampler.Stage, // sampling for scoring
	}
	if b.cfg.Scoring.Recent.IncludeContent {
		b.Records = append(b.Records, b.recentIn) // keeps a short preview of query and answer
	}
	if b.export != nil {
		// Recent records for GET /api/v1/export, first: the sampling stage publishes retrieval
		// scores at once, and they must find their record kept.
		b.Records = append(record.Fanout{b.export}, b.Records...)
	}
	// Feedback joined after its record goes to the same kind of list.
	b.Feedback = feedbackFanout{
		b.Signals,
		b.Alerts,
		b.Sampler.Stage, // late negative feedback can sample its record
	}
	// Labels joined after their record, or never joined: one record.LabelConsumer per line.
	b.Labels = labelFanout{
		b.Agreement,     // pairs late labels with their record's scores: judge agreement
		b.Sampler.Stage, // scores late relevance grades against the record's ranking: retrieval metrics
	}
	if b.export != nil {
		b.Labels = append(b.Labels, b.export) // exported records carry the labels posted after them
		// Late relevance labels for records older than the stage's rankings, or from before a
		// restart, are scored against the export store's copy.
		b.Sampler.Stage.RankingsFrom(b.export.Ranking)
	}
	if b.EvalExport != nil {
		b.Labels = append(b.Labels, b.EvalExport) // a person's correction, next to the judge's score
	}
	// Shadow pairs once both halves arrived: one record.PairConsumer per line.
	b.Pairs = pairFanout{
		b.Sampler.Pairs, // queues pair jobs for the pairwise judge
	}
	// The join, the assembler and the API hold &App.Records, so the test sinks appended at the
	// end of build are seen; nothing may be appended after New returns (the fan-out is read
	// without a lock).
	var kv jetstream.KeyValue
	if b.cfg.Feedback.Bucket != "" {
		var err error
		if kv, err = b.NATS.KeyValue(b.ctx, b.cfg.Feedback.Bucket, b.cfg.Feedback.Retention+time.Hour, b.cfg.Feedback.MaxBytes); err != nil {
			return lifecycle{}, err
		}
		b.NATS.Store().Watch("join", kvStream(b.cfg.Feedback.Bucket))
	}
	conv := b.cfg.Conversation
	j, err := join.New(join.Settings{
		Retention:       b.cfg.Feedback.Retention,
		MaxEntries:      b.cfg.Feedback.MaxEntries,
		Next:            &b.Records,
		NextFeedback:    &b.Feedback,
		NextLabel:       &b.Labels,
		NextContent:     b.Sampler.Stage, // GenAI answers after their record: queued with the sampled record
		NextPair:        &b.Pairs,
		PairWait:        b.cfg.Pairs.Wait,
		MaxPendingPairs: b.cfg.Pairs.MaxPending,
		SessionTTL:      conv.SessionTTL,
		MaxSessions:     conv.MaxSessions,
		MaxHistoryTurns: conv.MaxHistoryTurns,
		MaxHistoryBytes: conv.MaxHistoryBytes,
		KV:              kv,
		PersistSeen:     b.cfg.Feedback.PersistSeen,
		Registerer:      b.Registry,
		Logger:          b.logger("join"),
		Now:             b.o.now,
	})
	if err != nil {
		return lifecycle{}, fmt.Errorf("build join: %w", err)
	}
	b.Join = j
	return lifecycle{start: j.Start, shutdown: j.Shutdown}, nil
}

// keepContent says which traces keep their documents' texts: those whose records the sampler
// may score (its rules, its rate by trace id) and those a human label waits for (they are
// sampled whatever the rate). nil keeps them all: with export on (it hands out unsampled
// records with their texts), or without a sampling stage.
func (b *builder) keepContent() func(pcommon.TraceID) bool {
	if b.export != nil || b.Sampler == nil || b.Sampler.Decider == nil || b.Join == nil {
		return nil
	}
	d, j := b.Sampler.Decider, b.Join
	return func(id pcommon.TraceID) bool { return d.KeepsContent(id) || j.LabelWaiting(id) }
}

func (b *builder) assembler() (lifecycle, error) {
	asm, err := assemble.New(assemble.Settings{
		Config:     assemblyConfig(b.cfg.Assembly, b.guard),
		Next:       b.Join,
		Feedback:   b.Join,
		Content:    b.Join, // GenAI events after their record, to join it as late feedback does
		Registerer: b.Registry,
		Logger:     b.logger("assemble"),
		Now:        b.o.now,
		// Records of traces whose tracestate declares no sampling probability.
		UpstreamProbability: b.cfg.Receivers.OTLP.UpstreamSamplingProbability,
		Conversation:        b.cfg.Conversation,
		VariantAttributes:   b.cfg.Variants.Attributes,
		RetrievalTools:      b.cfg.Conventions.RetrievalTools,
		KeepContent:         b.keepContent(),
	})
	if err != nil {
		return lifecycle{}, fmt.Errorf("build assembler: %w", err)
	}
	b.Assembler = asm
	return lifecycle{start: asm.Start, shutdown: asm.Shutdown}, nil
}

// http is the HTTP server of either command, with http.tls and http.auth: /metrics, /healthz
// and /readyz on http.endpoint, the profiler always and in run mode the /api/v1/ endpoints on
// http.api_endpoint.
func (b *builder) http() (lifecycle, error) {
	tlsConf, tokens, err := b.httpSecurity(b.cfg)
	if err != nil {
		return lifecycle{}, err
	}
	bounds, counts := b.listenLimits()
	srv, err := httpapi.New(httpapi.Settings{
		Endpoint:    b.cfg.HTTP.Endpoint,
		APIEndpoint: b.cfg.HTTP.APIEndpoint,
		Gatherer:    b.Registry,
		Metrics:     b.Ingest,
		TLS:         tlsConf,
		Tokens:      tokens,
		Refuse:      refuseFunc(b.guard),

		RefuseRetryAfter: memlimit.RetryAfter,
		Listen:           bounds,
		ListenMetrics:    counts,
		Logger:           b.logger("http"),
	})
	if err != nil {
		return lifecycle{}, fmt.Errorf("build HTTP server: %w", err)
	}
	b.HTTP = srv
	nc := b.NATS.NC
	natsUp := func() error {
		if !nc.IsConnected() {
			return errors.New("NATS is not connected")
		}
		return nil
	}
	// A sidecar's readiness is its app pod's: an external cluster's outage must not take every
	// app pod out of its Service. Intake goes on (samples are counted as dropped), so NATS is
	// reported, not required; the embedded server is part of the process, and a worker without
	// NATS has nothing to do. docs/deploy.md has the table.
	if b.mode == ModeRun && !b.NATS.Embedded() {
		srv.AddStatusCheck("nats", natsUp)
	} else {
		srv.AddReadinessCheck("nats", natsUp)
	}
	// The embedded server's store failing writes (its volume full, no file descriptor left):
	// intake goes on and what cannot be stored is counted; the streams are reloaded once the
	// store dir takes a write again (natsconn.StoreHealth).
	srv.AddStatusCheck("store", b.NATS.Store().Err)
	if j := b.Join; j != nil {
		srv.AddStatusCheck("feedback_state", func() error {
			if j.StorageFull() {
				return errors.New("JetStream storage full: the join goes on from memory")
			}
			return nil
		})
	}
	if b.Sampler != nil {
		pub := b.Sampler.Publisher
		srv.AddStatusCheck("scoring_queue", func() error {
			if pub.StorageFull() {
				return errors.New("JetStream storage full: samples are dropped (storage_full)")
			}
			return nil
		})
	}
	if b.mode == ModeRun {
		// The HTTP intake: records, feedback and labels into the join, as natsin hands them.
		in := b.cfg.Limits.Intake
		intake, err := httpin.New(httpin.Settings{
			Records: b.Join, Feedback: b.Join, Labels: b.Join, Metrics: b.Ingest,
			MaxBodyBytes: in.MaxAPIBodyBytes, MaxJSONDepth: in.MaxJSONDepth, MaxRecordsPerBatch: in.MaxRecordsPerBatch,
			Logger: b.logger("http"), Now: b.o.now,
		})
		if err != nil {
			return lifecycle{}, fmt.Errorf("build HTTP intake: %w", err)
		}
		intake.Mount(srv)
		srv.Mount("GET /api/v1/alerts", b.Alerts.Handler())
		srv.Mount("GET /api/v1/comparisons", b.Alerts.ComparisonsHandler())
		srv.Mount("GET /api/v1/scores", b.recent.Handler())
		srv.Mount("GET /api/v1/pairwise", b.Sampler.Pairwise.Handler())
		b.mountCalibration(srv)
		if b.export != nil {
			srv.Mount("GET /api/v1/export", b.export.Handler(b.o.now))
		}
		if b.reload, err = newReloader(b.o.reload, b.o.now, b.Registry, b.logger("reload")); err != nil {
			return lifecycle{}, err
		}
		srv.Mount("POST /api/v1/reload", b.reloadHandler())
		srv.Mount("GET /api/v1/config", b.configInForce()) // what reloads changed, redacted
	}
	return lifecycle{start: srv.Start, shutdown: srv.Shutdown}, nil
}

func (b *builder) otlpReceivers() (lifecycle, error) {
	sec, err := b.otlpSecurity(b.cfg)
	if err != nil {
		return lifecycle{}, err
	}
	bounds, counts := b.listenLimits()
	rcv, err := otlp.New(otlp.Settings{
		GRPCEndpoint: b.cfg.Receivers.OTLP.GRPC.Endpoint,
		HTTPEndpoint: b.cfg.Receivers.OTLP.HTTP.Endpoint,
		Limits:       otlpLimits(b.cfg),
		Next:         b.Assembler,
		Logs:         b.Assembler,
		Metrics:      b.Ingest,
		GRPCTLS:      sec.grpcTLS,
		HTTPTLS:      sec.otlpHTTPTLS,
		GRPCTokens:   sec.grpcTokens,
		HTTPTokens:   sec.otlpHTTPTokens,
		Refuse:       refuseFunc(b.guard),
		Admit:        admitFunc(b.guard),

		MaxConcurrentStreams: uint32(b.cfg.Receivers.OTLP.MaxConcurrentStreams), // validated ≤ 2^20

		RefuseRetryAfter: memlimit.RetryAfter,
		Listen:           bounds,
		ListenMetrics:    counts,
		Logger:           b.logger("otlp"),
	})
	if err != nil {
		return lifecycle{}, fmt.Errorf("build OTLP receivers: %w", err)
	}
	b.Receivers = rcv
	b.HTTP.AddReadinessCheck("otlp", rcv.Ready)
	return lifecycle{start: rcv.Start, shutdown: rcv.Shutdown}, nil
}

// natsSubscribers reads the NATS subjects: records, feedback and labels into the join, OTLP into the
// assembler.
func (b *builder) natsSubscribers() (lifecycle, error) {
	var dedup jetstream.KeyValue
	if c := b.cfg.NATS.Consume; c.Mode == config.NATSModeJetStream {
		var err error
		if dedup, err = b.NATS.KeyValue(b.ctx, c.DedupBucket, c.DedupWindow, c.DedupMaxBytes); err != nil {
			return lifecycle{}, err
		}
		b.NATS.Store().Watch("dedup", kvStream(c.DedupBucket))
		b.NATS.Store().Watch("intake", c.Stream) // written by the app's publishes, read here
	}
	in := b.cfg.Limits.Intake
	sub, err := natsin.New(natsin.Settings{
		NC: b.NATS.NC, JS: b.NATS.JS, Config: b.cfg.NATS,
		Records: b.Join, Traces: b.Assembler, Logs: b.Assembler, Feedback: b.Join, Labels: b.Join,
		Metrics: b.Ingest, DedupKV: dedup, Registerer: b.Registry,
		Refuse: refuseFunc(b.guard), RefuseDelay: memlimit.RetryAfter,
		OTLPLimits:   otlpLimits(b.cfg), // the same limits as the OTLP receivers
		MaxJSONDepth: in.MaxJSONDepth, MaxRecordsPerBatch: in.MaxRecordsPerBatch,
		Logger: b.logger("natsin"), Now: b.o.now,
	})
	if err != nil {
		return lifecycle{}, fmt.Errorf("build NATS subscribers: %w", err)
	}
	b.NATSIn = sub
	return lifecycle{start: sub.Start, shutdown: sub.Shutdown}, nil
}
