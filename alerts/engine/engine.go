package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/drift"
	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/labels"
	"github.com/ragwatch/ragwatch/internal/record"
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

// Options builds an Engine. Config is required; the rest may be nil.
type Options struct {
	Config     *config.Config
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Store persists window state; nil keeps it in memory only.
	Store Store
	// Sink delivers alerts (the notify dispatcher).
	Sink Sink
	// Services bounds the service label; shared with the rest of the process when given.
	Services *labels.ServiceSet
	// Baseline is the pinned drift reference; nil loads drift.baseline_file when set.
	Baseline *drift.Baseline
}

// Engine evaluates SLOs and drift detectors. It implements record.Consumer,
// record.FeedbackConsumer and score.Consumer.
type Engine struct {
	now       func() time.Time
	logger    *slog.Logger
	store     Store
	sink      Sink
	services  *labels.ServiceSet
	baseline  *drift.Baseline
	traceTmpl string
	interval  time.Duration
	saveEvery time.Duration
	retention time.Duration
	m         *metrics

	mu       sync.Mutex // guards rules, byMetric, forgotten and all instance state
	rules    []*rule
	byMetric map[string][]*rule
	// forgotten holds the store keys of instances dropped by dropEvicted, deleted by the next
	// Save (eviction happens on the record path, which must not wait for the store).
	forgotten []string

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
)

// New builds the engine from cfg.SLOs, cfg.Drift and cfg.Alerting.
func New(o Options) (*Engine, error) {
	if o.Config == nil {
		return nil, errors.New("alert engine: no config")
	}
	if err := config.CheckAlertRefs(o.Config); err != nil {
		return nil, err
	}
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
		o.Services = labels.NewServiceSet(max(o.Config.Signals.MaxServices, 1))
	}
	c := o.Config
	if o.Baseline == nil && c.Drift.BaselineFile != "" {
		b, err := drift.LoadBaseline(c.Drift.BaselineFile)
		if err != nil {
			return nil, err
		}
		o.Baseline = b
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("alert engine metrics: %w", err)
	}
	e := &Engine{now: o.Now, logger: o.Logger, store: o.Store, sink: o.Sink, services: o.Services, baseline: o.Baseline,
		traceTmpl: c.Alerting.TraceURLTemplate, interval: c.Alerting.EvaluationInterval, saveEvery: c.Alerting.SaveInterval,
		retention: time.Duration(c.Alerting.ResolvedRetention), m: m, byMetric: map[string][]*rule{}, stopOnce: &sync.Once{}}
	for _, s := range c.SLOs {
		r, err := newSLORule(s, c.Alerting.DashboardURL)
		if err != nil {
			return nil, err
		}
		e.addRule(r)
	}
	for _, d := range c.Drift.Detectors {
		e.addRule(newDriftRule(d, c.Drift, c.Alerting.DashboardURL))
	}
	o.Services.OnEvict(e.forget)
	return e, nil
}

// forget queues a service label the shared set has evicted (signals.service_ttl) for the next
// Evaluate to drop. It runs inside ServiceSet.Label, which the engine calls with mu held, so it
// takes only evictMu.
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

// ConsumeRecord implements record.Consumer: the record's signals feed the SLOs and detectors
// watching them, with weight 1 (every request is observed).
func (e *Engine) ConsumeRecord(_ context.Context, r *record.Record) error {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	var err error
	eachSignal(r, func(name string, v float64) {
		if e2 := e.observe(name, r.Service, v, 1, slo.Sample{TraceID: r.TraceID, SpanID: r.SpanID, Value: v, Time: now}, now); e2 != nil && err == nil {
			err = e2
		}
	})
	return err
}

// ConsumeFeedback implements record.FeedbackConsumer: negative_feedback_rate and
// feedback_score.
func (e *Engine) ConsumeFeedback(_ context.Context, f record.Feedback) error {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	var err error
	eachFeedbackSignal(&f, func(name string, v float64) {
		if e2 := e.observe(name, f.Service, v, 1, slo.Sample{TraceID: f.TraceID, SpanID: f.SpanID, Value: v, Time: now}, now); e2 != nil && err == nil {
			err = e2
		}
	})
	return err
}

// ConsumeScores implements score.Consumer: each result feeds the SLOs and detectors on its
// metric with weight 1/p (Result.Weight; 0 means 1).
func (e *Engine) ConsumeScores(_ context.Context, results []score.Result) error {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for i := range results {
		res := &results[i]
		w := res.Weight
		if w == 0 {
			w = 1
		}
		if err := e.observe(res.Metric, res.Service, res.Value, w,
			slo.Sample{TraceID: res.TraceID, SpanID: res.SpanID, Value: res.Value, Time: now}, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// observe adds one value to every rule on metric. Called with e.mu held.
func (e *Engine) observe(metric, service string, x, w float64, s slo.Sample, now time.Time) error {
	rules := e.byMetric[metric]
	if len(rules) == 0 {
		return nil
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		e.m.rejected.WithLabelValues("invalid_value").Inc()
		return fmt.Errorf("alert engine: %s value is not a finite number", metric)
	}
	if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
		e.m.rejected.WithLabelValues("invalid_weight").Inc()
		return fmt.Errorf("alert engine: %s weight must be a finite non-negative number", metric)
	}
	var label string
	for _, r := range rules {
		key := r.service
		if key != "" {
			if service != key {
				continue
			}
		} else {
			if label == "" {
				label = e.services.Label(service)
			}
			key = label
		}
		r.add(e.instance(r, key), now, x, w, s)
	}
	return nil
}

// instance returns (creating) a rule's state for a service. Called with e.mu held.
func (e *Engine) instance(r *rule, service string) *instance {
	in, ok := r.instances[service]
	if !ok {
		in = r.newInstance()
		r.instances[service] = in
	}
	if in.counters.samples == nil && r.kind != alerts.KindDrift {
		in.counters = e.m.sloCounters(r.name, service)
	}
	return in
}

// Evaluate runs one evaluation at the engine's clock: it steps every alert, updates the
// gauges, hands firing and recently resolved alerts to the sink and returns the firing and
// just-resolved ones.
func (e *Engine) Evaluate(ctx context.Context) []alerts.Alert {
	now := e.now()
	e.mu.Lock()
	e.dropEvicted()
	var out, resend []alerts.Alert
	firing := map[[2]string]int{}
	for _, r := range e.rules {
		for _, service := range slices.Sorted(maps.Keys(r.instances)) {
			in := r.instances[service]
			for _, ev := range r.evaluate(e, service, in, now) {
				m := in.Machines[ev.severity]
				if m == nil {
					m = &Machine{Phase: phaseInactive}
					in.Machines[ev.severity] = m
				}
				tr := m.Step(now, ev.breach, ev.recovered, r.forDur, r.keep)
				a := ev.alert
				switch {
				case m.Firing():
					a.Status, a.StartsAt = alerts.StatusFiring, m.FiringSince
					firing[[2]string{r.name, ev.severity}]++
				case tr == Resolved:
					a.Status, a.EndsAt = alerts.StatusResolved, now
					if last := in.Last[ev.severity]; last != nil {
						a.StartsAt = last.StartsAt
					}
				default:
					// A resolve is offered again for ResolvedResend so that one failed or
					// rate-limited delivery does not leave an incident open; notifiers
					// send it once.
					if last := in.Last[ev.severity]; last != nil && last.Status == alerts.StatusResolved &&
						now.Sub(last.EndsAt) < ResolvedResend {
						resend = append(resend, *last)
					}
					continue
				}
				if tr == Fired {
					e.logger.Warn("alert firing", "alert", a.Name, "rule", r.name, "service", service,
						"severity", a.Severity, "value", a.Value, "n", a.N)
				} else if tr == Resolved {
					e.logger.Info("alert resolved", "alert", a.Name, "rule", r.name, "service", service, "severity", a.Severity)
				}
				cp := a
				in.Last[ev.severity] = &cp
				out = append(out, a)
			}
		}
		for _, sev := range r.severities() {
			e.m.firing.WithLabelValues(r.name, sev).Set(float64(firing[[2]string{r.name, sev}]))
		}
	}
	e.mu.Unlock()
	if e.sink != nil && len(out)+len(resend) > 0 {
		e.sink.Send(ctx, append(append([]alerts.Alert(nil), out...), resend...))
	}
	return out
}

// ResolvedResend is how long after resolving an alert is still handed to the sink.
const ResolvedResend = 5 * time.Minute

// Alerts lists firing alerts and those resolved within alerting.resolved_retention, firing
// first, newest first.
func (e *Engine) Alerts() []alerts.Alert {
	now := e.now()
	e.mu.Lock()
	out := []alerts.Alert{}
	for _, r := range e.rules {
		for _, in := range r.instances {
			for sev, a := range in.Last {
				m := in.Machines[sev]
				switch {
				case a.Status == alerts.StatusFiring && m != nil && m.Firing():
				case a.Status == alerts.StatusResolved && now.Sub(a.EndsAt) <= e.retention:
				default:
					continue
				}
				cp := *a
				cp.Labels = copyMap(a.Labels)
				cp.Evidence = append([]alerts.Evidence{}, a.Evidence...)
				out = append(out, cp)
			}
		}
	}
	e.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Firing() != out[j].Firing() {
			return out[i].Firing()
		}
		if !out[i].StartsAt.Equal(out[j].StartsAt) {
			return out[i].StartsAt.After(out[j].StartsAt)
		}
		return out[i].Fingerprint < out[j].Fingerprint
	})
	return out
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// persisted is one rule instance's saved state.
type persisted struct {
	Version  int       `json:"version"`
	Service  string    `json:"service"`
	Instance *instance `json:"instance"`
}

// stateKey is the store key of a rule's state for a service: "<slo|drift>.<name>.<service in
// base64url>" (the service may hold characters KV keys do not allow; the encoding has no dot).
func stateKey(r *rule, service string) string {
	return r.storeKey() + "." + base64.RawURLEncoding.EncodeToString([]byte(service))
}

// Save writes every rule instance's state to the store, one key each, so that no value grows
// with the number of services.
func (e *Engine) Save(ctx context.Context) error {
	if e.store == nil {
		return nil
	}
	now := e.now()
	type item struct {
		key  string
		data []byte
	}
	var items []item
	var errs []error
	e.mu.Lock()
	forgotten := e.forgotten
	e.forgotten = nil
	for _, r := range e.rules {
		for _, service := range slices.Sorted(maps.Keys(r.instances)) {
			in := r.instances[service]
			r.stripOldExemplars(in, now)
			data, err := json.Marshal(persisted{Version: 1, Service: service, Instance: in})
			if err != nil {
				errs = append(errs, fmt.Errorf("encode alert state %s: %w", stateKey(r, service), err))
				continue
			}
			items = append(items, item{stateKey(r, service), data})
		}
	}
	e.mu.Unlock()
	saved := make(map[string]bool, len(items))
	for _, it := range items {
		saved[it.key] = true
		if err := e.store.Save(ctx, it.key, it.data); err != nil {
			errs = append(errs, err)
		}
	}
	for _, key := range forgotten {
		if saved[key] {
			continue // the service came back since: its new state was just saved
		}
		if err := e.store.Delete(ctx, key); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		e.m.saves.WithLabelValues("error").Inc()
		return err
	}
	e.m.saves.WithLabelValues("ok").Inc()
	return nil
}

// Load restores state saved by Save. State whose window shape no longer matches the config is
// dropped (logged), never misread.
func (e *Engine) Load(ctx context.Context) error {
	if e.store == nil {
		return nil
	}
	var errs []error
	for _, r := range e.rules {
		prefix := r.storeKey() + "."
		keys, err := e.store.List(ctx, prefix)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, key := range keys {
			if strings.Contains(strings.TrimPrefix(key, prefix), ".") {
				continue // another rule whose name extends this one's
			}
			data, err := e.store.Load(ctx, key)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			var p persisted
			if err := json.Unmarshal(data, &p); err != nil || p.Version != 1 || p.Instance == nil {
				e.logger.Warn("dropping unreadable alert state", "key", key, "error", err)
				continue
			}
			in := p.Instance
			if !r.compatible(in) {
				e.logger.Warn("dropping alert state from another window configuration", "key", key)
				continue
			}
			r.sanitize(in)
			if in.Machines == nil {
				in.Machines = map[string]*Machine{}
			}
			if in.Last == nil {
				in.Last = map[string]*alerts.Alert{}
			}
			for _, a := range in.Last {
				a.Notifiers = r.notifiers
			}
			e.mu.Lock()
			r.instances[p.Service] = in
			e.instance(r, p.Service)
			e.mu.Unlock()
		}
	}
	return errors.Join(errs...)
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
