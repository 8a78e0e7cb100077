package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/notify/alertmanager"
	"github.com/ragwatch/ragwatch/alerts/notify/pagerduty"
	"github.com/ragwatch/ragwatch/alerts/notify/slack"
	"github.com/ragwatch/ragwatch/alerts/notify/webhook"
	"github.com/ragwatch/ragwatch/config"
)

// Notifier sends one alert (firing or resolved). retry reports whether a failure may succeed
// if tried again.
type Notifier interface {
	Notify(ctx context.Context, a alerts.Alert) (retry bool, err error)
}

// Outcomes of ragwatch_notifications_total.
const (
	OutcomeSent        = "sent"
	OutcomeFailed      = "failed"
	OutcomeRateLimited = "rate_limited"
	OutcomeDropped     = "dropped"
)

// Build makes the notifier for one config entry, reading its secrets from the environment.
func Build(c config.Notifier, client *http.Client, now func() time.Time) (Notifier, error) {
	switch c.Type {
	case config.NotifierAlertmanager:
		cfg, err := alertmanager.NewConfig(c)
		if err != nil {
			return nil, err
		}
		return alertmanager.New(cfg, client, now), nil
	case config.NotifierPagerDuty:
		cfg, err := pagerduty.NewConfig(c)
		if err != nil {
			return nil, err
		}
		return pagerduty.New(cfg, client), nil
	case config.NotifierSlack:
		cfg, err := slack.NewConfig(c)
		if err != nil {
			return nil, err
		}
		return slack.New(cfg, client), nil
	case config.NotifierWebhook:
		cfg, err := webhook.NewConfig(c)
		if err != nil {
			return nil, err
		}
		return webhook.New(cfg, client, now), nil
	}
	return nil, fmt.Errorf("notifier %s: unknown type %q", c.Name, c.Type)
}

// Entry is one notifier with its delivery settings.
type Entry struct {
	Config   config.Notifier
	Notifier Notifier
}

// Options configures a Dispatcher. All may be zero.
type Options struct {
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time
	// Sleep waits between retries; it returns early with ctx's error.
	Sleep func(ctx context.Context, d time.Duration) error
	// Client is the HTTP client of the built-in notifiers (timeouts are per notifier).
	Client    *http.Client
	QueueSize int
}

// Dispatcher fans alerts out to the notifiers. It implements engine.Sink.
type Dispatcher struct {
	workers []*worker
	logger  *slog.Logger
	sent    *prometheus.CounterVec
	retries *prometheus.CounterVec
	opts    Options // with defaults filled, for workers built by Update

	mu      sync.Mutex // guards workers (Update swaps them) and the fields below
	started bool
	closed  bool
	ctx     context.Context // the workers' context, set by Start
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New builds the dispatcher for the configured notifiers.
func New(cfgs []config.Notifier, o Options) (*Dispatcher, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	entries, err := buildAll(cfgs, o)
	if err != nil {
		return nil, err
	}
	return NewWith(entries, o)
}

// buildAll builds every configured notifier, each with its own timeout, and reports every
// one that cannot be built.
func buildAll(cfgs []config.Notifier, o Options) ([]Entry, error) {
	var entries []Entry
	var errs []error
	for _, c := range cfgs {
		client := o.Client
		if client == nil {
			client = &http.Client{}
		}
		cl := *client
		cl.Timeout = c.Timeout
		n, err := Build(c, &cl, o.Now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries = append(entries, Entry{Config: c, Notifier: n})
	}
	return entries, errors.Join(errs...)
}

// NewWith builds a dispatcher over ready notifiers (tests, custom integrations).
func NewWith(entries []Entry, o Options) (*Dispatcher, error) {
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 1024
	}
	d := &Dispatcher{logger: o.Logger, opts: o,
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: alerts.MetricNotifications,
			Help: "Alert notifications by notifier and outcome (sent, failed, rate_limited, dropped)."}, []string{"notifier", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: alerts.MetricNotifyRetries,
			Help: "Notification attempts retried after a 429, 5xx or network error."}, []string{"notifier"}),
	}
	for _, c := range []prometheus.Collector{d.sent, d.retries} {
		if err := o.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("notify metrics: %w", err)
		}
	}
	for _, e := range entries {
		d.workers = append(d.workers, d.newWorker(e))
	}
	return d, nil
}

func (d *Dispatcher) newWorker(e Entry) *worker {
	o := d.opts
	perSec := e.Config.RatePerMinute / 60
	burst := max(1, int(e.Config.RatePerMinute/6))
	w := &worker{name: e.Config.Name, cfg: e.Config, n: e.Notifier, d: d, now: o.Now, sleep: o.Sleep, logger: o.Logger,
		q: make(chan alerts.Alert, o.QueueSize), lim: rate.NewLimiter(rate.Limit(perSec), burst),
		last: map[string]sentState{}}
	for _, oc := range []string{OutcomeSent, OutcomeFailed, OutcomeRateLimited, OutcomeDropped} {
		d.sent.WithLabelValues(w.name, oc)
	}
	d.retries.WithLabelValues(w.name)
	return w
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Send queues alerts for the notifiers they name (all when none); it never blocks: a full
// queue drops the alert and counts it.
func (d *Dispatcher) Send(_ context.Context, list []alerts.Alert) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	for _, a := range list {
		for _, w := range d.workers {
			if !wants(a.Notifiers, w.name) {
				continue
			}
			select {
			case w.q <- a:
			default:
				d.sent.WithLabelValues(w.name, OutcomeDropped).Inc()
				d.logger.Warn("notification queue full, alert dropped", "notifier", w.name, "alert", a.Name, "rule", a.Rule)
			}
		}
	}
}

func wants(names []string, name string) bool {
	if len(names) == 0 {
		return true
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// Start starts one worker per notifier.
func (d *Dispatcher) Start(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.closed {
		return errors.New("notify dispatcher already started")
	}
	d.started = true
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.ctx = ctx
	for _, w := range d.workers {
		d.run(w)
	}
	return nil
}

// run starts w's goroutine; it ends when w.q is closed and drained. Called with d.mu held
// after Start.
func (d *Dispatcher) run(w *worker) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for a := range w.q {
			w.process(d.ctx, a)
		}
	}()
}

// Shutdown stops accepting alerts and lets the workers drain their queues until ctx ends, then
// cancels what is in flight. Idempotent; safe without Start.
func (d *Dispatcher) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	for _, w := range d.workers {
		close(w.q)
	}
	started := d.started
	d.mu.Unlock()
	if !started {
		return nil
	}
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		d.cancel()
		return nil
	case <-ctx.Done():
		d.cancel()
		<-done
		return ctx.Err()
	}
}

type sentState struct {
	status string
	at     time.Time
}

// worker delivers to one notifier. last is only touched by the worker goroutine.
type worker struct {
	name   string
	cfg    config.Notifier
	n      Notifier
	d      *Dispatcher
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
	logger *slog.Logger
	q      chan alerts.Alert
	lim    *rate.Limiter
	last   map[string]sentState
}

// process runs the stages: repeat → rate limit → retry.
func (w *worker) process(ctx context.Context, a alerts.Alert) {
	now := w.now()
	prev, seen := w.last[a.Fingerprint]
	if a.Firing() && seen && prev.status == alerts.StatusFiring &&
		(w.cfg.RepeatInterval == 0 || now.Sub(prev.at) < time.Duration(w.cfg.RepeatInterval)) {
		return // already told, not yet time to repeat
	}
	if !a.Firing() && seen && prev.status == alerts.StatusResolved {
		return // the resolve was delivered; the engine offers it again for a while
	}
	if !w.lim.AllowN(now, 1) {
		w.d.sent.WithLabelValues(w.name, OutcomeRateLimited).Inc()
		w.logger.Warn("notification rate-limited", "notifier", w.name, "alert", a.Name, "rule", a.Rule, "status", a.Status)
		return // the next evaluation offers it again
	}
	if err := w.retry(ctx, a); err != nil {
		w.d.sent.WithLabelValues(w.name, OutcomeFailed).Inc()
		w.logger.Error("notification failed", "notifier", w.name, "type", w.cfg.Type, "alert", a.Name, "rule", a.Rule,
			"status", a.Status, "error", err)
		return
	}
	w.d.sent.WithLabelValues(w.name, OutcomeSent).Inc()
	w.last[a.Fingerprint] = sentState{status: a.Status, at: now}
	w.gc(now)
}

// gc forgets delivered resolves once the engine no longer offers them, so last stays bounded
// by the alerts that exist.
func (w *worker) gc(now time.Time) {
	for fp, st := range w.last {
		if st.status == alerts.StatusResolved && now.Sub(st.at) > time.Hour {
			delete(w.last, fp)
		}
	}
}

func (w *worker) retry(ctx context.Context, a alerts.Alert) error {
	backoff := w.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		retry, err := w.n.Notify(ctx, a)
		if err == nil {
			return nil
		}
		if !retry || attempt >= w.cfg.MaxRetries {
			return fmt.Errorf("%s %s: %w (after %d attempts)", w.cfg.Type, w.name, err, attempt+1)
		}
		w.d.retries.WithLabelValues(w.name).Inc()
		w.logger.Debug("notification retry", "notifier", w.name, "attempt", attempt+1, "error", err, "backoff", backoff)
		if err := w.sleep(ctx, backoff); err != nil {
			return fmt.Errorf("%s %s: %w", w.cfg.Type, w.name, err)
		}
		backoff = min(2*backoff, time.Minute)
	}
}
