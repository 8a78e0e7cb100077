package labelcal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of LearnerOptions.
const (
	DefaultMaxPairs  = 2000
	DefaultMaxSeries = 256
)

// LearnerOptions configure a Learner.
type LearnerOptions struct {
	MinLabels  int    // labelled scores a series needs before a fit (0: DefaultMinLabels)
	Folds      int    // cross-validation folds (0: DefaultFolds)
	MaxPairs   int    // newest pairs kept per series (0: DefaultMaxPairs)
	MaxSeries  int    // (service, metric) series tracked (0: DefaultMaxSeries); more are dropped and counted
	RefitEvery int    // new pairs between two fits of a series (0: MinLabels / 4)
	Store      *Store // where maps are versioned (nil: in memory only)
	Registerer prometheus.Registerer
	Now        func() time.Time
	Queue      int          // pairs waiting for the fitting goroutine (0: DefaultQueue); more are dropped and counted
	Logger     *slog.Logger // nil: slog.Default()
}

type seriesKey struct{ service, metric string }

type series struct {
	pairs    []Pair // oldest first, at most MaxPairs
	sinceFit int
	current  *Map // the newest version, applied or not
}

// Learner collects (builtin score, human label) pairs per service and metric, refits a series'
// map every RefitEvery new pairs once it has MinLabels, stores each fit as a new version, and
// maps scores with the newest version when that one is applied.
//
// Locking: mu guards series; the store is written with mu held, so versions of one series are
// stored in the order they were fitted.
type Learner struct {
	o      LearnerOptions
	mu     sync.Mutex
	series map[seriesKey]*series

	fits    *prometheus.CounterVec
	dropped *prometheus.CounterVec

	// inUse holds the maps Calibrate applies (applied, not reverted), rebuilt under mu by
	// publish whenever a series' newest version changes: the scoring path reads it without
	// waiting for a fit or a store write.
	inUse atomic.Pointer[map[seriesKey]*Map]

	in     chan pairIn // Offer → fit (Start)
	runMu  sync.Mutex  // guards cancel
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewLearner builds a Learner.
func NewLearner(o LearnerOptions) (*Learner, error) {
	if o.MinLabels <= 0 {
		o.MinLabels = DefaultMinLabels
	}
	if o.Folds <= 1 {
		o.Folds = DefaultFolds
	}
	if o.MaxPairs <= 0 {
		o.MaxPairs = DefaultMaxPairs
	}
	o.MaxPairs = max(o.MaxPairs, o.MinLabels)
	if o.MaxSeries <= 0 {
		o.MaxSeries = DefaultMaxSeries
	}
	if o.RefitEvery <= 0 {
		o.RefitEvery = max(1, o.MinLabels/4)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	l := &Learner{
		o:      o,
		series: map[seriesKey]*series{},
		in:     make(chan pairIn, o.Queue),
		fits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_label_calibration_fits_total",
			Help: "Calibration maps fitted from human labels, by outcome: applied (better on held-out labels), not_applied, or store_failed.",
		}, []string{"outcome"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_label_calibration_pairs_dropped_total",
			Help: "Labelled scores not used for calibration, by reason: invalid (outside [0, 1]), series_limit, or queue_full (the fitting goroutine fell behind).",
		}, []string{"reason"}),
	}
	for _, o := range []string{"applied", "not_applied", "store_failed"} {
		l.fits.WithLabelValues(o)
	}
	for _, r := range []string{"invalid", "series_limit", "queue_full"} {
		l.dropped.WithLabelValues(r)
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{l.fits, l.dropped} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register label calibration metrics: %w", err)
			}
		}
	}
	return l, nil
}

// Load reads the newest version of every series from the store (a restart keeps the maps; the
// pairs are collected again).
func (l *Learner) Load(ctx context.Context) error {
	if l.o.Store == nil {
		return nil
	}
	maps, err := l.o.Store.Current(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range maps {
		m := maps[i]
		s := l.seriesOf(seriesKey{m.Service, m.Metric})
		if s != nil {
			s.current = &m
		}
	}
	l.publish()
	return err
}

// seriesOf returns the series of k, creating it under the limit (nil beyond it). mu held.
func (l *Learner) seriesOf(k seriesKey) *series {
	s, ok := l.series[k]
	if !ok {
		if len(l.series) >= l.o.MaxSeries {
			return nil
		}
		s = &series{}
		l.series[k] = s
	}
	return s
}

// Observe adds one labelled score of service's metric. When the series is due, it refits and
// stores the new version; the returned map is that version (nil when no fit happened). A
// refused pair or a failed store write is an error; the pair is counted either way.
func (l *Learner) Observe(ctx context.Context, service, metric string, p Pair) (*Map, error) {
	if !valid(p.Score) || !valid(p.Label) {
		l.dropped.WithLabelValues("invalid").Inc()
		return nil, fmt.Errorf("label calibration: score %v, label %v: both must be in [0, 1]", p.Score, p.Label)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.seriesOf(seriesKey{service, metric})
	if s == nil {
		l.dropped.WithLabelValues("series_limit").Inc()
		return nil, fmt.Errorf("label calibration: %d series tracked already", l.o.MaxSeries)
	}
	if len(s.pairs) == l.o.MaxPairs {
		s.pairs = append(s.pairs[:0], s.pairs[1:]...)
	}
	s.pairs = append(s.pairs, p)
	s.sinceFit++
	if len(s.pairs) < l.o.MinLabels || (s.current != nil && s.sinceFit < l.o.RefitEvery) {
		return nil, nil
	}
	m, err := Fit(s.pairs, Options{MinLabels: l.o.MinLabels, Folds: l.o.Folds})
	if err != nil {
		return nil, err
	}
	s.sinceFit = 0
	m.Service, m.Metric, m.FittedAt = service, metric, l.o.Now()
	m.Reverted = s.current != nil && s.current.Reverted // an operator's revert holds until Restore
	if l.o.Store != nil {
		stored, err := l.o.Store.Put(ctx, m)
		if err != nil {
			l.fits.WithLabelValues("store_failed").Inc()
			return nil, err // the previous version stays in use
		}
		m = stored
	} else if s.current != nil {
		m.Version = s.current.Version + 1
	} else {
		m.Version = 1
	}
	outcome := "not_applied"
	if m.Applied {
		outcome = "applied"
	}
	l.fits.WithLabelValues(outcome).Inc()
	s.current = &m
	l.publish()
	return &m, nil
}

// Apply maps v, a builtin score of service's metric, with the series' newest version when that
// is applied and not reverted; ok is false (v unchanged) otherwise.
func (l *Learner) Apply(service, metric string, v float64) (mapped float64, version uint64, ok bool) {
	m := l.inUseMap(service, metric)
	if m == nil {
		return v, 0, false
	}
	return m.Apply(v), m.Version, true
}

// inUseMap returns the map applied to service's metric, or nil.
func (l *Learner) inUseMap(service, metric string) *Map {
	p := l.inUse.Load()
	if p == nil {
		return nil
	}
	return (*p)[seriesKey{service, metric}]
}

// publish rebuilds inUse from the series' newest versions. mu held.
func (l *Learner) publish() {
	use := map[seriesKey]*Map{}
	for k, s := range l.series {
		if s.current != nil && s.current.Applied && !s.current.Reverted {
			use[k] = s.current
		}
	}
	l.inUse.Store(&use)
}

// Maps returns the newest version of every series, by service and metric.
func (l *Learner) Maps() []Map {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Map
	for _, s := range l.series {
		if s.current != nil {
			out = append(out, *s.current)
		}
	}
	slices.SortFunc(out, func(a, b Map) int {
		if a.Service != b.Service {
			return compare(a.Service, b.Service)
		}
		return compare(a.Metric, b.Metric)
	})
	return out
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ErrNoMap is returned by Revert for a series without a map.
var ErrNoMap = errors.New("no calibration map for this service and metric")

// Revert turns the series' map off: a new version, the newest map marked Reverted, is stored, so
// scores pass unchanged and the history shows which map was in use when. Later fits are still
// made and stored (their agreement stays visible) but stay reverted until Restore.
func (l *Learner) Revert(ctx context.Context, service, metric string) (Map, error) {
	return l.setReverted(ctx, service, metric, true)
}

// Restore undoes Revert: the newest map is stored again as a new version, in use when it is
// applied (better on held-out labels).
func (l *Learner) Restore(ctx context.Context, service, metric string) (Map, error) {
	return l.setReverted(ctx, service, metric, false)
}

func (l *Learner) setReverted(ctx context.Context, service, metric string, reverted bool) (Map, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.series[seriesKey{service, metric}]
	if s == nil || s.current == nil {
		return Map{}, ErrNoMap
	}
	m := *s.current
	m.Reverted = reverted
	if l.o.Store != nil {
		stored, err := l.o.Store.Put(ctx, m)
		if err != nil {
			return Map{}, err
		}
		m = stored
	} else {
		m.Version++
	}
	s.current = &m
	l.publish()
	return m, nil
}
