package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/comparison"
	"github.com/ragwatch/ragwatch/alerts/diagnosis"
	"github.com/ragwatch/ragwatch/alerts/drift"
	"github.com/ragwatch/ragwatch/alerts/judgeagreement"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/reqsignal"
	"github.com/ragwatch/ragwatch/internal/score"
)

// Sink receives, after every evaluation, the firing alerts and those resolved in it. It must
// not block (the notify dispatcher queues).
type Sink interface {
	Send(ctx context.Context, alerts []alerts.Alert)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(ctx context.Context, alerts []alerts.Alert)

// Send calls f.
func (f SinkFunc) Send(ctx context.Context, a []alerts.Alert) { f(ctx, a) }

// Sections is the engine's part of a config: each part of the engine takes its own section
// from it (the rules SLOs and Drift, comparison.Set Comparisons, the diagnoser
// Alerting.Diagnosis). It comes from a config that config.Load (or config.Parse) validated,
// cross-section references included (config.CheckAlertRefs): New and Update trust it and do
// not check it again.
type Sections struct {
	SLOs        []config.SLO
	Drift       config.Drift
	Alerting    config.Alerting
	Comparisons []config.Comparison
	// MaxVariants bounds the comparisons' variant labels (variants.max_values).
	MaxVariants int
}

// SectionsOf takes the engine's sections out of a loaded config, once, at wiring.
func SectionsOf(c *config.Config) Sections {
	return Sections{SLOs: c.SLOs, Drift: c.Drift, Alerting: c.Alerting, Comparisons: c.Comparisons,
		MaxVariants: c.Variants.MaxValues}
}

// Options builds an Engine. Sections is what it evaluates; the rest may be nil.
type Options struct {
	Sections   Sections
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Store persists window state; nil keeps it in memory only.
	Store Store
	// Sink delivers alerts (the notify dispatcher).
	Sink Sink
	// Services bounds the service label; shared with the rest of the process when given.
	Services *cardinality.ServiceSet
	// Baseline is the pinned drift reference (drift.baseline_file, read at wiring with
	// drift.LoadBaseline); nil compares each detector with its trailing reference window.
	Baseline *drift.Baseline
}

// Engine evaluates SLOs and drift detectors. It implements record.Consumer,
// record.FeedbackConsumer and score.Consumer, and is the judgeagreement.Sink of the judge
// agreement statistics (agreement.go).
type Engine struct {
	now       func() time.Time
	logger    *slog.Logger
	store     Store
	sink      Sink
	services  *cardinality.ServiceSet
	baseline  *drift.Baseline
	traceTmpl string
	interval  time.Duration
	saveEvery time.Duration
	retention time.Duration
	m         *metrics
	cmp       *comparison.Set      // config `comparisons:`; its own lock, nested inside mu
	diag      *diagnosis.Diagnoser // findings attached to every alert; its own lock

	mu       sync.Mutex // guards rules, byMetric, bySignal, forgotten and all instance state
	rules    []*rule
	byMetric map[string][]*rule
	// bySignal is what watches each record signal: byMetric's rules and whether a comparison
	// does (indexSignals).
	bySignal [reqsignal.Num]signalWatch
	// watchesSignals is whether anything watches a signal of the catalog: when nothing does, a
	// record is not measured. Written with mu held, read before taking it.
	watchesSignals atomic.Bool
	// forgotten holds the store keys of instances dropped by dropEvicted, deleted by the next
	// Save (eviction happens on the record path, which must not wait for the store).
	forgotten []string
	// judgeVersions tracks the definition version of each judge metric (judgeversion.go).
	judgeVersions map[string]*judgeVersions

	evictMu sync.Mutex // guards evicted; taken inside mu, never the other way round
	evicted []string   // service labels evicted from the set, dropped by the next Evaluate

	stateMu  sync.Mutex // serialises Start/Shutdown
	started  bool
	stop     chan struct{}
	wg       sync.WaitGroup
	stopOnce *sync.Once
}

var (
	_ record.Consumer         = (*Engine)(nil)
	_ record.FeedbackConsumer = (*Engine)(nil)
	_ score.Consumer          = (*Engine)(nil)
	_ judgeagreement.Sink     = (*Engine)(nil)
)

// New builds the engine from o.Sections.
func New(o Options) (*Engine, error) {
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Services == nil {
		o.Services = cardinality.NewServiceSet(config.Default().Signals.MaxServices)
	}
	c := o.Sections
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("alert engine metrics: %w", err)
	}
	diag, err := diagnosis.New(diagnosisSettings(c.Alerting.Diagnosis), o.Services, o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("alert engine: %w", err)
	}
	e := &Engine{diag: diag, now: o.Now, logger: o.Logger, store: o.Store, sink: o.Sink, services: o.Services, baseline: o.Baseline,
		traceTmpl: c.Alerting.TraceURLTemplate.Reveal(), interval: c.Alerting.EvaluationInterval, saveEvery: c.Alerting.SaveInterval,
		retention: time.Duration(c.Alerting.ResolvedRetention), m: m, byMetric: map[string][]*rule{}, stopOnce: &sync.Once{}}
	if e.cmp, err = comparison.New(c.Comparisons, c.MaxVariants, o.Registerer, c.Alerting.DashboardURL.Reveal(), e.traceTmpl); err != nil {
		return nil, fmt.Errorf("alert engine metrics: %w", err)
	}
	for _, s := range c.SLOs {
		e.addRule(newSLORule(s, c.Alerting.DashboardURL.Reveal()))
	}
	for _, d := range c.Drift.Detectors {
		e.addRule(newDriftRule(d, c.Drift, c.Alerting.DashboardURL.Reveal()))
	}
	e.indexSignals()
	o.Services.OnEvict(e.forget)
	return e, nil
}

// forget queues a service label the shared set has evicted (signals.service_ttl) for the next
// Evaluate to drop. It runs inside ServiceSet.Label, which the engine calls with or without mu
// held, so it takes only evictMu.
func (e *Engine) forget(service string) {
	e.evictMu.Lock()
	e.evicted = append(e.evicted, service)
	e.evictMu.Unlock()
}

// dropEvicted drops the state of the queued evicted labels, so that names which come and go do
// not pile up windows, series and store keys: the set bounds the labels alive at once, this
// keeps the engine to the same bound. A label admitted again since keeps its state; so does an
// instance with an alert pending or firing, so its resolution is still sent, and a rule for one
// configured service (its key is the configured name, not a label of the set). Called with mu
// held.
func (e *Engine) dropEvicted() {
	e.evictMu.Lock()
	evicted := e.evicted
	e.evicted = nil
	e.evictMu.Unlock()
	for _, service := range evicted {
		if e.services.Admitted(service) {
			continue
		}
		for _, r := range e.rules {
			in, ok := r.instances[service]
			if r.service != "" || !ok || in.active() {
				continue
			}
			delete(r.instances, service)
			e.m.forget(r, service)
			if e.store != nil {
				e.forgotten = append(e.forgotten, stateKey(r, service))
			}
		}
	}
}

type signalWatch struct {
	rules    []*rule
	compared bool
}

// indexSignals rebuilds bySignal once the rules and comparisons are in place. Called with e.mu
// held (or before the engine is shared).
func (e *Engine) indexSignals() {
	watched := false
	for i := range reqsignal.All {
		name := reqsignal.All[i].Name
		w := signalWatch{rules: e.byMetric[name], compared: e.cmp.Watches(name)}
		e.bySignal[i] = w
		watched = watched || len(w.rules) > 0 || w.compared
	}
	e.watchesSignals.Store(watched)
}

func (e *Engine) addRule(r *rule) {
	e.rules = append(e.rules, r)
	e.byMetric[r.metric] = append(e.byMetric[r.metric], r)
	for _, sev := range r.severities() {
		e.m.firing.WithLabelValues(r.name, sev).Set(0)
	}
}

func (r *rule) severities() []string {
	switch r.kind {
	case alerts.KindDrift:
		return []string{r.det.Severity}
	case alerts.KindBurnRate:
		var out []string
		seen := map[string]bool{}
		for _, p := range r.sloCfg.BurnRates {
			if !seen[p.Severity] {
				seen[p.Severity] = true
				out = append(out, p.Severity)
			}
		}
		return out
	}
	return []string{r.sloCfg.Severity}
}

// Start loads saved state and starts the evaluation and save loop. It returns quickly.
func (e *Engine) Start(ctx context.Context) error {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	if e.started {
		return errors.New("alert engine already started")
	}
	if err := e.Load(ctx); err != nil {
		e.logger.Warn("alert state not restored", "error", err)
	}
	e.started = true
	e.stop = make(chan struct{})
	e.stopOnce = &sync.Once{}
	e.wg.Add(1)
	go e.loop(e.stop)
	return nil
}

func (e *Engine) loop(stop chan struct{}) {
	defer e.wg.Done()
	eval := time.NewTicker(e.interval)
	defer eval.Stop()
	save := time.NewTicker(e.saveEvery)
	defer save.Stop()
	for {
		select {
		case <-stop:
			return
		case <-eval.C:
			e.Evaluate(context.Background())
		case <-save.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := e.Save(ctx); err != nil {
				e.logger.Warn("alert state not saved", "error", err)
			}
			cancel()
		}
	}
}

// Shutdown stops the loop and saves state. It is idempotent and safe without Start.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	if !e.started {
		return nil
	}
	e.stopOnce.Do(func() { close(e.stop) })
	e.wg.Wait()
	e.started = false
	return e.Save(ctx)
}
