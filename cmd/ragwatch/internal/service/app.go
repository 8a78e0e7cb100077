package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ragwatch/ragwatch/alerts/engine"
	"github.com/ragwatch/ragwatch/alerts/notify"
	"github.com/ragwatch/ragwatch/collector/assemble"
	"github.com/ragwatch/ragwatch/collector/feedback"
	"github.com/ragwatch/ragwatch/collector/natsin"
	"github.com/ragwatch/ragwatch/collector/otlp"
	"github.com/ragwatch/ragwatch/collector/signals"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/httpapi"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/labels"
	"github.com/ragwatch/ragwatch/internal/memlimit"
	"github.com/ragwatch/ragwatch/internal/natsconn"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler"
	"github.com/ragwatch/ragwatch/sampler/queue"
	"github.com/ragwatch/ragwatch/sampler/ring"
	"github.com/ragwatch/ragwatch/sampler/scorers"
)

// Option adjusts how the App is built; tests use them to observe the pipeline.
type Option func(*options)

type options struct {
	registry *prometheus.Registry
	sinks    []record.Consumer
	now      func() time.Time
	reload   reloadOptions // reload.go
	// heap and heapInterval replace the memory guard's heap reader (limits.go).
	heap         func() uint64
	heapInterval time.Duration
}

// WithRegistry uses reg instead of a fresh registry (Go and process collectors are added to
// it either way).
func WithRegistry(reg *prometheus.Registry) Option { return func(o *options) { o.registry = reg } }

// WithRecordSink appends c as the last stage of the record fan-out: it sees every record the
// assembler or the API produces, after every other stage.
func WithRecordSink(c record.Consumer) Option {
	return func(o *options) { o.sinks = append(o.sinks, c) }
}

// WithClock sets the clock of the stages that take one.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// component is one part with a lifecycle. Components start in the order they are added and
// shut down in reverse.
type component struct {
	name     string
	start    func(context.Context) error
	shutdown func(context.Context) error
}

// App is a built ragwatch pipeline.
type App struct {
	cfg *config.Config
	log *slog.Logger

	// Registry holds every ragwatch metric plus the Go and process collectors.
	Registry *prometheus.Registry
	// Services is the one bounded set of service label values of the process.
	Services *labels.ServiceSet
	// Ingest counts intake for every receiver.
	Ingest *ingest.Metrics

	Signals *signals.Signals
	// Alerts evaluates SLOs and drift; it is a record, feedback and score consumer (add it to
	// the score fan-out) and serves GET /api/v1/alerts. Notify delivers its alerts.
	Alerts    *engine.Engine
	Notify    *notify.Dispatcher
	Assembler *assemble.Assembler
	// Sampler samples records to the JetStream scoring queue and, unless scoring.workers is
	// 0, scores them in process (docs/sampling.md).
	Sampler *sampler.Runtime
	// NATS is the one connection (embedded server or cluster) every NATS user shares; it is
	// opened by New and closed last by Shutdown.
	NATS *natsconn.Conn
	// FeedbackJoin sits in front of Records: it attaches early feedback to its record and
	// sends late feedback to Feedback. It serves POST /api/v1/feedback.
	FeedbackJoin *feedback.Join
	// NATSIn reads records, OTLP traces and feedback from the NATS subjects.
	NATSIn    *natsin.Subscriber
	Receivers *otlp.Receiver
	HTTP      *httpapi.Server

	// Records is the record fan-out: what the assembler and POST /api/v1/records feed.
	Records record.Fanout
	// Feedback receives feedback joined after its record.
	Feedback feedbackFanout

	components []component
	// reload applies a re-read config (reload.go); its lock guards cfg after New.
	reload *reloader

	mu      sync.Mutex // guards started and stopped
	started int        // components started, for undoing a half-done Start
	stopped bool
}

// New builds the pipeline from cfg without starting anything. cfg must be valid
// (config.Load validates).
func New(cfg *config.Config, logger *slog.Logger, opts ...Option) (*App, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if o.now == nil {
		o.now = time.Now
	}
	reg := o.registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if err := registerRuntime(reg); err != nil {
		return nil, err
	}
	a := &App{
		cfg:      cfg,
		log:      logger,
		Registry: reg,
		Services: labels.NewServiceSet(cfg.Signals.MaxServices),
		Ingest:   ingest.NewMetrics(reg),
	}
	built := false
	defer func() {
		if !built { // release what a half-built App holds (the NATS server, its port)
			_ = a.Shutdown(context.Background())
		}
	}()

	// NATS first: added first, it starts first and closes last, after every stage that
	// publishes or keeps state in it.
	nctx, cancel := context.WithTimeout(context.Background(), cfg.NATS.ConnectTimeout+5*time.Second)
	defer cancel()
	conn, err := natsconn.Connect(nctx, cfg.NATS, reg, logger.With("component", "nats"))
	if err != nil {
		return nil, err
	}
	a.NATS = conn
	a.add("nats", func(context.Context) error { return nil }, func(context.Context) error { conn.Close(); return nil })

	// The memory guard samples the heap; every receiver asks it before reading input
	// (limits.go). The redactor cleans text before it leaves the process (security.go).
	guard := newGuard(cfg, &o, reg)
	a.add("memory guard", guard.Start, guard.Shutdown)
	redactor, err := buildRedactor(cfg, reg)
	if err != nil {
		return nil, err
	}

	// --- Back of the pipeline: the record consumers. -----------------------------------------
	sig, err := signals.New(signals.Settings{
		Signals:    cfg.Signals,
		Exporters:  cfg.Exporters,
		Services:   a.Services,
		Registerer: reg,
		Logger:     logger.With("component", "signals"),
		Now:        o.now,
	})
	if err != nil {
		return nil, fmt.Errorf("build signals: %w", err)
	}
	a.Signals = sig
	a.add("signals", sig.Start, sig.Shutdown)

	// Alerts: the dispatcher starts before the engine and stops after it, so the engine's
	// last alerts are delivered and its state saved.
	disp, err := notify.New(cfg.Notifiers, notify.Options{
		Registerer: reg, Logger: logger.With("component", "notify"), Now: o.now,
	})
	if err != nil {
		return nil, fmt.Errorf("build notifiers: %w", err)
	}
	a.Notify = disp
	a.add("notifiers", disp.Start, disp.Shutdown)
	var alertStore engine.Store
	if cfg.Alerting.StateBucket != "" { // window state survives restarts in JetStream KV
		kv, err := conn.KeyValue(nctx, cfg.Alerting.StateBucket, 0)
		if err != nil {
			return nil, err
		}
		alertStore = engine.KVStore{KV: kv}
	}
	alertEngine, err := engine.New(engine.Options{
		Config: cfg, Registerer: reg, Logger: logger.With("component", "alerts"), Now: o.now,
		Sink: disp, Services: a.Services, Store: alertStore,
	})
	if err != nil {
		return nil, fmt.Errorf("build alert engine: %w", err)
	}
	a.Alerts = alertEngine
	a.add("alert engine", alertEngine.Start, alertEngine.Shutdown)

	// Sampling and scoring: the stage queues a consistent sample on JetStream; in-process
	// workers (scoring.workers; 0 leaves scoring to `ragwatch worker` pods) publish results on
	// ragwatch.scores.<service>, which the alert engine reads back exactly as it would from
	// worker pods. The subscription is added first so it stops after the workers.
	// The ring behind GET /api/v1/scores: the worst recent scores, fed by the same
	// subscription as the alert engine, so it shows worker pods' scores too.
	recent := ring.New(cfg.Scoring.Recent.Size, cfg.Scoring.Recent.IncludeContent)
	recentIn := redactRecent(recent, redactor) // API output: explanations and previews redacted
	var active []score.Scorer
	if cfg.Scoring.Workers > 0 {
		if active, err = scorers.Build(cfg.Scoring, reg, logger.With("component", "scorers"), JudgeRedaction(redactor)...); err != nil {
			return nil, fmt.Errorf("build scorers: %w", err)
		}
		active = redactScorers(active, redactor) // explanations leave on NATS and the API
	}
	samp := sampler.NewRuntime(cfg, conn.JS, conn.Replicas, active, nil, a.Services, reg, logger.With("component", "sampler"))
	a.Sampler = samp
	var scoresSub *nats.Subscription
	a.add("scores subscription", func(context.Context) error {
		sub, err := queue.SubscribeScores(conn.NC, cfg.Scoring.Queue.ScoresSubjectPrefix, score.Fanout{alertEngine, recentIn}, reg, logger.With("component", "scores"))
		scoresSub = sub
		return err
	}, func(context.Context) error {
		if scoresSub == nil {
			return nil
		}
		return scoresSub.Unsubscribe()
	})
	a.add("sampler", samp.Start, samp.Shutdown)

	// Record stages, in the order each record visits them. Append new stages here, each built
	// with what it needs above this line and started through a.add so it runs before the
	// assembler and receivers start and stops after they drain.
	a.Records = record.Fanout{
		sig,         // online signals: Prometheus, statsd, OTLP metrics
		alertEngine, // signal SLOs and drift
		samp.Stage,  // sampling for scoring
	}
	if cfg.Scoring.Recent.IncludeContent {
		a.Records = append(a.Records, recentIn) // keeps a short preview of query and answer
	}
	// Feedback joined after its record goes to the same kind of list.
	a.Feedback = feedbackFanout{
		sig,
		alertEngine,
		samp.Stage, // late negative feedback can sample its record
	}
	// The assembler and the API hold &a.Records, so stages appended anywhere in New are seen;
	// nothing may be appended after New returns (the fan-out is read without a lock).

	// The feedback join, in front of the record fan-out: records and feedback from every
	// receiver pass through it so each feedback reaches the stages once, joined to its record.
	var feedbackKV jetstream.KeyValue
	if cfg.Feedback.Bucket != "" {
		feedbackKV, err = conn.KeyValue(nctx, cfg.Feedback.Bucket, cfg.Feedback.Retention+time.Hour)
		if err != nil {
			return nil, err
		}
	}
	join, err := feedback.New(feedback.Settings{
		Retention:    cfg.Feedback.Retention,
		MaxEntries:   cfg.Feedback.MaxEntries,
		Next:         &a.Records,
		NextFeedback: &a.Feedback,
		KV:           feedbackKV,
		PersistSeen:  cfg.Feedback.PersistSeen,
		Registerer:   reg,
		Logger:       logger.With("component", "feedback"),
		Now:          o.now,
	})
	if err != nil {
		return nil, fmt.Errorf("build feedback join: %w", err)
	}
	a.FeedbackJoin = join
	a.add("feedback join", join.Start, join.Shutdown)

	// --- Middle: the assembler turns spans into records. -------------------------------------
	asm, err := assemble.New(assemble.Settings{
		Config:     cfg.Assembly,
		Next:       join,
		Feedback:   join,
		Registerer: reg,
		Logger:     logger.With("component", "assemble"),
		Now:        o.now,
	})
	if err != nil {
		return nil, fmt.Errorf("build assembler: %w", err)
	}
	a.Assembler = asm
	a.add("assembler", asm.Start, asm.Shutdown)

	// --- Front: the HTTP server and the receivers. -------------------------------------------
	sec, err := buildSecurity(cfg)
	if err != nil {
		return nil, err
	}
	srv, err := httpapi.New(httpapi.Settings{
		Endpoint: cfg.HTTP.Endpoint,
		Gatherer: reg,
		Records:  join,
		Metrics:  a.Ingest,
		TLS:      sec.httpTLS,
		Tokens:   sec.httpTokens,
		Refuse:   refuseFunc(guard),

		RefuseRetryAfter:   memlimit.RetryAfter,
		MaxBodyBytes:       cfg.Limits.Intake.MaxAPIBodyBytes,
		MaxJSONDepth:       cfg.Limits.Intake.MaxJSONDepth,
		MaxRecordsPerBatch: cfg.Limits.Intake.MaxRecordsPerBatch,
		Logger:             logger.With("component", "http"),
		Now:                o.now,
	})
	if err != nil {
		return nil, fmt.Errorf("build HTTP server: %w", err)
	}
	a.HTTP = srv
	srv.Mount("GET /api/v1/alerts", alertEngine.Handler())
	srv.Mount("GET /api/v1/scores", recent.Handler())
	srv.Mount("POST /api/v1/feedback", join.Handler(a.Ingest))
	if a.reload, err = newReloader(o.reload, o.now, reg, logger.With("component", "reload")); err != nil {
		return nil, err
	}
	srv.Mount("POST /api/v1/reload", a.reloadHandler())
	srv.Mount("GET /api/v1/config", a.configInForce()) // what reloads changed, redacted
	a.add("http", srv.Start, srv.Shutdown)

	rcv, err := otlp.New(otlp.Settings{
		GRPCEndpoint: cfg.Receivers.OTLP.GRPC.Endpoint,
		HTTPEndpoint: cfg.Receivers.OTLP.HTTP.Endpoint,
		Limits:       otlpLimits(cfg),
		Next:         asm,
		Metrics:      a.Ingest,
		GRPCTLS:      sec.grpcTLS,
		HTTPTLS:      sec.otlpHTTPTLS,
		GRPCTokens:   sec.grpcTokens,
		HTTPTokens:   sec.otlpHTTPTokens,
		Refuse:       refuseFunc(guard),

		RefuseRetryAfter: memlimit.RetryAfter,
		Logger:           logger.With("component", "otlp"),
	})
	if err != nil {
		return nil, fmt.Errorf("build OTLP receivers: %w", err)
	}
	a.Receivers = rcv
	srv.AddReadinessCheck("otlp", rcv.Ready)
	a.add("otlp receivers", rcv.Start, rcv.Shutdown)

	// NATS subjects: records and feedback into the join, OTLP into the assembler.
	var dedupKV jetstream.KeyValue
	if cfg.NATS.Consume.Mode == config.NATSModeJetStream {
		dedupKV, err = conn.KeyValue(nctx, cfg.NATS.Consume.DedupBucket, cfg.NATS.Consume.DedupWindow)
		if err != nil {
			return nil, err
		}
	}
	natsIn, err := natsin.New(natsin.Settings{
		NC: conn.NC, JS: conn.JS, Config: cfg.NATS,
		Records: join, Traces: asm, Feedback: join,
		Metrics: a.Ingest, DedupKV: dedupKV, Registerer: reg,
		Refuse: refuseFunc(guard), RefuseDelay: memlimit.RetryAfter,
		MaxJSONDepth: cfg.Limits.Intake.MaxJSONDepth, MaxRecordsPerBatch: cfg.Limits.Intake.MaxRecordsPerBatch,
		Logger: logger.With("component", "natsin"), Now: o.now,
	})
	if err != nil {
		return nil, fmt.Errorf("build NATS subscribers: %w", err)
	}
	a.NATSIn = natsIn
	srv.AddReadinessCheck("nats", func() error {
		if !conn.NC.IsConnected() {
			return errors.New("NATS is not connected")
		}
		return nil
	})
	a.add("nats subscribers", natsIn.Start, natsIn.Shutdown)

	// Test sinks see each record after every real stage.
	a.Records = append(a.Records, o.sinks...)
	built = true
	return a, nil
}

func registerRuntime(reg *prometheus.Registry) error {
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return fmt.Errorf("register runtime metrics: %w", err)
			}
		}
	}
	return nil
}

// add appends a component; components start in the order added and stop in reverse.
func (a *App) add(name string, start, shutdown func(context.Context) error) {
	a.components = append(a.components, component{name: name, start: start, shutdown: shutdown})
}

// Start starts every component, back of the pipeline first. On failure it shuts down what
// started and returns both errors.
func (a *App) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started > 0 || a.stopped {
		return errors.New("app: Start called twice")
	}
	for _, c := range a.components {
		if err := c.start(ctx); err != nil {
			err = fmt.Errorf("start %s: %w", c.name, err)
			return errors.Join(err, a.shutdownLocked(ctx))
		}
		a.started++
	}
	a.log.Info("ragwatch running",
		"otlp_grpc", addrString(a.Receivers.GRPCAddr()),
		"otlp_http", addrString(a.Receivers.HTTPAddr()),
		"http", addrString(a.HTTP.Addr()))
	return nil
}

// Shutdown stops the components front first: receivers and the API stop accepting, the
// assembler assembles and delivers what it holds, then the record stages flush. It is
// idempotent and safe without Start.
func (a *App) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.shutdownLocked(ctx)
}

func (a *App) shutdownLocked(ctx context.Context) error {
	if a.stopped {
		return nil
	}
	a.stopped = true
	var errs []error
	// Every component is shut down, started or not: shutdown is safe without start and
	// releases what New set up.
	for i := len(a.components) - 1; i >= 0; i-- {
		c := a.components[i]
		start := time.Now()
		if err := c.shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", c.name, err))
		}
		a.log.Debug("stopped", "component", c.name, "took", time.Since(start))
	}
	return errors.Join(errs...)
}

// Addrs are where the App listens, for logs and tests.
type Addrs struct {
	OTLPGRPC, OTLPHTTP, HTTP string
}

// Addrs returns the bound addresses ("" when disabled or not started).
func (a *App) Addrs() Addrs {
	return Addrs{
		OTLPGRPC: addrString(a.Receivers.GRPCAddr()),
		OTLPHTTP: addrString(a.Receivers.HTTPAddr()),
		HTTP:     addrString(a.HTTP.Addr()),
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// feedbackFanout hands late feedback to every consumer and joins their errors.
type feedbackFanout []record.FeedbackConsumer

// ConsumeFeedback implements record.FeedbackConsumer.
func (f *feedbackFanout) ConsumeFeedback(ctx context.Context, fb record.Feedback) error {
	var errs []error
	for _, c := range *f {
		if err := c.ConsumeFeedback(ctx, fb); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
