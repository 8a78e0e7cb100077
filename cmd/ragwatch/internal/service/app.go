package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ragwatch/ragwatch/alerts/engine"
	"github.com/ragwatch/ragwatch/alerts/judgeagreement"
	"github.com/ragwatch/ragwatch/alerts/notify"
	"github.com/ragwatch/ragwatch/collector/assemble"
	"github.com/ragwatch/ragwatch/collector/join"
	"github.com/ragwatch/ragwatch/collector/natsin"
	"github.com/ragwatch/ragwatch/collector/otlp"
	"github.com/ragwatch/ragwatch/collector/signals"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/httpapi"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/logflood"
	"github.com/ragwatch/ragwatch/internal/natsconn"
	"github.com/ragwatch/ragwatch/internal/promreg"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler"
	"github.com/ragwatch/ragwatch/sampler/evalexport"
	"github.com/ragwatch/ragwatch/sampler/golden"
	"github.com/ragwatch/ragwatch/sampler/labelcal"
	"github.com/ragwatch/ragwatch/sampler/scorers"
	"github.com/ragwatch/ragwatch/sampler/worker"
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
	cgroup       fs.FS // WithCgroupFS; nil reads the machine's
}

// WithRegistry uses reg instead of a fresh registry (Go and process collectors are added to
// it either way).
func WithRegistry(reg *prometheus.Registry) Option { return func(o *options) { o.registry = reg } }

// WithRecordSink appends c as the last stage of the record fan-out: it sees every record the
// assembler or the API produces, after every other stage. The worker has no fan-out.
func WithRecordSink(c record.Consumer) Option {
	return func(o *options) { o.sinks = append(o.sinks, c) }
}

// WithClock sets the clock of the stages that take one.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Mode is which command a build is for: `ragwatch run` (the sidecar) or `ragwatch worker`
// (scoring pods). Each entry of parts names the modes that run it.
type Mode uint8

const (
	// ModeRun is the whole pipeline of `ragwatch run`.
	ModeRun Mode = 1 << iota
	// ModeWorker is the subset of `ragwatch worker`: NATS, the scoring workers and the HTTP
	// server (probes, /metrics, the profiler) with the same http.tls and http.auth.
	ModeWorker
)

// part is one entry of the component list: the modes that run it and how it is built. build
// sets the App's field for the part and returns its start and shutdown; it may use the parts
// built before it (the App's fields), never those after.
type part struct {
	name  string
	modes Mode
	build func(*builder) (lifecycle, error)
}

// parts is the one ordered list of components of both commands, from the back of the pipeline
// to the front: New and NewWorker build the entries of their mode top to bottom, Start starts
// them in that order, so nothing flows into a stage that is not running, and Shutdown stops
// them bottom to top: intake stops first and NATS closes last. Add a new stage here, below
// the parts it hands its output to and above those that feed it (build.go holds the builders).
var parts = []part{
	// NATS first: it starts first and closes last, after every part that publishes or keeps
	// state in it.
	{"nats", ModeRun | ModeWorker, (*builder).nats},
	// Every receiver asks the memory guard before reading input; the worker takes no intake.
	{"memory guard", ModeRun, (*builder).memoryGuard},
	// --- Back of the pipeline: the record consumers. ---
	{"signals", ModeRun, (*builder).signals},
	// The dispatcher starts before the engine and stops after it, so the engine's last alerts
	// are delivered and its state saved.
	{"notifiers", ModeRun, (*builder).notifiers},
	{"alert engine", ModeRun, (*builder).alertEngine},
	// Each service's calibration maps of the builtin metrics, fitted on its labels: fed by the
	// judge agreement's pairs, applied by the scoring workers, versioned in a KV bucket that
	// worker pods watch.
	{"label calibration", ModeRun | ModeWorker, (*builder).labelCalibration},
	// Human labels paired with judge scores; it feeds the agreement SLOs of the engine.
	{"judge agreement", ModeRun, (*builder).judgeAgreement},
	// Score results and late human labels out to trace backends (OTLP events, Langfuse,
	// Phoenix): fed by the process that scored (the loopback, the worker's pool) and by the
	// join's late labels, so it stops after all of them and sends what they queued.
	{"evaluation export", ModeRun | ModeWorker, (*builder).evaluationExport},
	// Scores from worker pods, and through its loopback from in-process workers, into the
	// alert engine and the ring behind GET /api/v1/scores; it stops after the workers.
	{"scores subscription", ModeRun, (*builder).scoresSubscription},
	// Sampling to the JetStream queue and, unless scoring.workers is 0, scoring in process.
	{"sampler", ModeRun, (*builder).sampler},
	// The judges' golden-set canary: the in-process scorers re-judge a labelled set.
	{"golden", ModeRun, (*builder).golden},
	// The worker's scoring: the same pool, pulling from the queue the sidecars feed.
	{"scoring workers", ModeWorker, (*builder).scoringWorkers},
	// The record fan-out's front: feedback and labels joined to their record once, shadow
	// pairs completed, turns given their session's history.
	{"join", ModeRun, (*builder).join},
	// --- Middle: spans into records. ---
	{"assembler", ModeRun, (*builder).assembler},
	// --- Front: the listeners. ---
	{"http", ModeRun | ModeWorker, (*builder).http},
	{"otlp receivers", ModeRun, (*builder).otlpReceivers},
	{"nats subscribers", ModeRun, (*builder).natsSubscribers},
}

// lifecycle is what a part's builder returns; nil functions do nothing.
type lifecycle struct {
	start, shutdown func(context.Context) error
}

// component is one built part. Components start in list order and shut down in reverse.
type component struct {
	name string
	lifecycle
}

// App is a built ragwatch pipeline: `ragwatch run`'s (New) or `ragwatch worker`'s (NewWorker).
// The fields of the parts a mode does not run are nil.
type App struct {
	cfg  *config.Config
	log  *slog.Logger
	mode Mode

	// Registry holds every ragwatch metric plus the Go and process collectors.
	Registry *prometheus.Registry
	// Services is the one bounded set of service label values of the process.
	Services *cardinality.ServiceSet
	// Variants is the one bounded set of variant label values of the process.
	Variants *cardinality.VariantSet
	// Ingest counts intake for every receiver.
	Ingest *ingest.Metrics

	Signals *signals.Signals
	// Alerts evaluates SLOs and drift; it is a record, feedback and score consumer (add it to
	// the score fan-out) and serves GET /api/v1/alerts. Notify delivers its alerts.
	Alerts *engine.Engine
	// Agreement pairs human labels with judge scores (a record, label and score consumer) and
	// feeds the statistics to Alerts' SLOs on agreement_<statistic>_<metric>.
	Agreement *judgeagreement.Tracker
	// Calibration fits, stores and applies each service's calibration maps of the builtin
	// metrics from its team's labels (scoring.builtin.calibration); nil when off.
	Calibration *labelcal.Learner
	// EvalExport sends this process's score results and late human labels to the trace
	// backends of the evaluations section; nil when none is set.
	EvalExport *evalexport.Exporter
	Notify     *notify.Dispatcher
	Assembler  *assemble.Assembler
	// Sampler samples records to the JetStream scoring queue and, unless scoring.workers is
	// 0, scores them in process (docs/sampling.md).
	Sampler *sampler.Runtime
	// Judges are the LLM scorers of the configured judges (the `judges` section), which a
	// reload changes; empty when no scorer runs in this process.
	Judges *scorers.JudgeSet
	// Golden is the judges' golden-set canary (golden.file); nil without one.
	Golden *golden.Canary
	// Workers is `ragwatch worker`'s scoring pool (nil in run mode, where Sampler.Pool is the
	// in-process one).
	Workers *worker.Pool
	// NATS is the one connection (embedded server or cluster) every NATS user shares; it is
	// opened by New and closed last by Shutdown.
	NATS *natsconn.Conn
	// Join sits in front of Records: it attaches early feedback and labels to their record
	// and sends late ones to Feedback and Labels, hands completed shadow pairs to Pairs, and
	// fills a turn's history from its session. It serves POST /api/v1/feedback and
	// /api/v1/labels.
	Join *join.Join
	// NATSIn reads records, OTLP traces and feedback from the NATS subjects.
	NATSIn    *natsin.Subscriber
	Receivers *otlp.Receiver
	HTTP      *httpapi.Server

	// Records is the record fan-out: what the assembler and POST /api/v1/records feed.
	Records record.Fanout
	// Feedback receives feedback joined after its record.
	Feedback feedbackFanout
	// Labels receives labels joined after their record, and orphaned ones.
	Labels labelFanout
	// Pairs receives shadow pairs once both records arrived: the sampler's PairStage, which
	// queues them for the pairwise judge. Empty in worker mode.
	Pairs pairFanout

	components []component
	// reload applies a re-read config (reload.go); its lock guards cfg after New. nil in
	// worker mode, which does not reload.
	reload *reloader
	// secretFiles are the token sets and TLS configs of the listeners, which a reload reads
	// again from their files (rotation, revocation).
	secretFiles []secretFile

	mu      sync.Mutex // guards started and stopped
	started int        // components started, for undoing a half-done Start
	stopped bool
}

// New builds `ragwatch run`'s pipeline from cfg without starting anything. cfg must be valid
// (config.Load validates).
func New(cfg *config.Config, logger *slog.Logger, opts ...Option) (*App, error) {
	return build(ModeRun, cfg, logger, opts)
}

// NewWorker builds `ragwatch worker` from the same list as New, keeping the worker's parts:
// the NATS connection to the cluster (nats.url), the scoring workers and the HTTP server with
// /metrics, /healthz, /readyz and the profiler, under http.tls and http.auth exactly as in run.
// cfg must be valid and pass CheckWorkerConfig. WithRecordSink and the reload options do not apply.
func NewWorker(cfg *config.Config, logger *slog.Logger, opts ...Option) (*App, error) {
	if err := CheckWorkerConfig(cfg); err != nil {
		return nil, err
	}
	return build(ModeWorker, cfg, logger, opts)
}

// CheckWorkerConfig reports what `ragwatch worker` needs beyond a valid config.
func CheckWorkerConfig(cfg *config.Config) error {
	if cfg.NATS.URL == "" {
		return errors.New("`nats.url` is required: workers pull from the cluster the sidecars queue to")
	}
	if cfg.Scoring.Workers <= 0 {
		return errors.New("`scoring.workers` must be positive")
	}
	return nil
}

func build(mode Mode, cfg *config.Config, logger *slog.Logger, opts []Option) (*App, error) {
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
	// Every component logs through one allowance per kind of message: a client that sends
	// 100,000 malformed messages is counted in full (ingest metrics) but logged ten times a
	// minute, with a summary line of the rest.
	lh, err := logflood.New(logger.Handler(), logflood.Settings{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("register log metrics: %w", err)
	}
	logger = slog.New(lh)
	goLimitFromCgroup(&o, logger.With("component", "memlimit")) // limits.go
	a := &App{
		cfg:      cfg,
		log:      logger,
		mode:     mode,
		Registry: reg,
		Services: cardinality.NewServiceSetTTL(cfg.Signals.MaxServices, cfg.Signals.ServiceTTL, o.now),
		Variants: cardinality.NewVariantSet(cfg.Variants.MaxValues, cfg.Signals.ServiceTTL, o.now),
		Ingest:   ingest.NewMetrics(reg),
		Judges:   scorers.NewJudgeSet(),
	}
	// Results of the judges may come from worker pods: the score subscription accepts them.
	for _, j := range cfg.Judges {
		score.RegisterJudgeMetrics(j.Metric())
	}
	built := false
	defer func() {
		if !built { // release what a half-built App holds (the NATS server, its port)
			_ = a.Shutdown(context.Background())
		}
	}()
	// NATS streams and KV buckets are created while the parts are built, within this bound.
	nctx, cancel := context.WithTimeout(context.Background(), cfg.NATS.ConnectTimeout+5*time.Second)
	defer cancel()
	b := &builder{App: a, o: &o, ctx: nctx}
	for _, p := range parts {
		if p.modes&mode == 0 {
			continue
		}
		lc, err := p.build(b)
		if err != nil {
			return nil, err
		}
		a.components = append(a.components, component{name: p.name, lifecycle: lc})
	}
	// Test sinks see each record after every real stage.
	if mode == ModeRun {
		a.Records = append(a.Records, o.sinks...)
	}
	built = true
	return a, nil
}

func registerRuntime(reg *prometheus.Registry) error {
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if _, err := promreg.Register(reg, c); err != nil {
			return fmt.Errorf("register runtime metrics: %w", err)
		}
	}
	return nil
}

// Start starts every component in list order, back of the pipeline first; each returns once
// it listens or runs in the background. On failure it shuts down everything and returns both
// errors.
func (a *App) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started > 0 || a.stopped {
		return errors.New("app: Start called twice")
	}
	for _, c := range a.components {
		if c.start == nil {
			a.started++
			continue
		}
		if err := c.start(ctx); err != nil {
			err = fmt.Errorf("start %s: %w", c.name, err)
			return errors.Join(err, a.shutdownLocked(ctx))
		}
		a.started++
	}
	addrs := a.Addrs()
	if a.mode == ModeWorker {
		a.log.Info("ragwatch worker ready", "http", addrs.HTTP, "workers", a.cfg.Scoring.Workers)
		return nil
	}
	a.log.Info("ragwatch running", "otlp_grpc", addrs.OTLPGRPC, "otlp_http", addrs.OTLPHTTP, "http", addrs.HTTP, "api", addrs.API)
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
		if c.shutdown == nil {
			continue
		}
		start := time.Now()
		if err := c.shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", c.name, err))
		}
		a.log.Debug("stopped", "component", c.name, "took", time.Since(start))
	}
	return errors.Join(errs...)
}

// Addrs are where the App listens, for logs and tests. API is the API listener's (HTTP's
// when http.api_endpoint is "").
type Addrs struct {
	OTLPGRPC, OTLPHTTP, HTTP, API string
}

// Addrs returns the bound addresses ("" when disabled, not started or not in the mode).
func (a *App) Addrs() Addrs {
	var out Addrs
	if a.Receivers != nil {
		out.OTLPGRPC, out.OTLPHTTP = addrString(a.Receivers.GRPCAddr()), addrString(a.Receivers.HTTPAddr())
	}
	if a.HTTP != nil {
		out.HTTP, out.API = addrString(a.HTTP.Addr()), addrString(a.HTTP.APIAddr())
	}
	return out
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

// labelFanout hands labels that arrived after their record to every consumer and joins their
// errors.
type labelFanout []record.LabelConsumer

// ConsumeLabel implements record.LabelConsumer.
func (f *labelFanout) ConsumeLabel(ctx context.Context, l record.Label) error {
	var errs []error
	for _, c := range *f {
		if err := c.ConsumeLabel(ctx, l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pairFanout hands completed shadow pairs to every consumer and joins their errors.
type pairFanout []record.PairConsumer

// ConsumePair implements record.PairConsumer.
func (f *pairFanout) ConsumePair(ctx context.Context, a, b *record.Record) error {
	var errs []error
	for _, c := range *f {
		if err := c.ConsumePair(ctx, a, b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
