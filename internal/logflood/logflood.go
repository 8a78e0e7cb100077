package logflood

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/promreg"
)

// Defaults: the first Burst records of a kind in each Interval are written as they come.
const (
	DefaultBurst    = 10
	DefaultInterval = time.Minute
	// maxKinds bounds the table: a message built from variable text (it should not be, but a
	// library's may) cannot grow it without end. Kinds beyond it share one allowance.
	maxKinds = 1024
)

// Settings configure New; zero fields take the defaults.
type Settings struct {
	Burst    int
	Interval time.Duration
	// Registerer, when set, receives ragwatch_log_messages_suppressed_total.
	Registerer prometheus.Registerer
	// now and after are the clock and the timer, replaced in tests.
	now   func() time.Time
	after func(time.Duration, func())
}

// Handler limits records per kind — a kind is the level and the message, which in ragwatch is
// a constant string; the attributes (subject, error, …) vary within a kind. Handlers derived
// with WithAttrs or WithGroup share the allowance of the one they came from.
type Handler struct {
	next  slog.Handler
	state *state
}

var _ slog.Handler = (*Handler)(nil)

type kind struct {
	level slog.Level
	msg   string
}

type window struct {
	start      time.Time
	passed     int
	suppressed int
	pending    bool         // a summary is scheduled: the window's allowance is used up
	handler    slog.Handler // the last suppressed record's, which writes the summary
}

type state struct {
	mu         sync.Mutex // guards kinds and every window in it
	kinds      map[kind]*window
	burst      int
	interval   time.Duration
	now        func() time.Time
	after      func(time.Duration, func())
	suppressed *prometheus.CounterVec
}

// New wraps next. Handlers built on one registry share its counter.
func New(next slog.Handler, set Settings) (*Handler, error) {
	s := &state{
		kinds:    make(map[kind]*window),
		burst:    set.Burst,
		interval: set.Interval,
		now:      set.now,
		after:    set.after,
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_log_messages_suppressed_total",
			Help: "Log records not written because more than the first few of their kind (level and message) came within a minute; one summary line per kind and minute counts them.",
		}, []string{"level"}),
	}
	if s.burst <= 0 {
		s.burst = DefaultBurst
	}
	if s.interval <= 0 {
		s.interval = DefaultInterval
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.after == nil {
		s.after = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	if set.Registerer != nil {
		c, err := promreg.Register(set.Registerer, s.suppressed)
		if err != nil {
			return nil, err
		}
		s.suppressed = c
	}
	return &Handler{next: next, state: s}, nil
}

// Enabled defers to the wrapped handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// WithAttrs and WithGroup keep the shared allowance.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(as), state: h.state}
}

func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), state: h.state}
}

// Handle writes r unless its kind has used its allowance in the current interval.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if h.state.admit(r.Level, r.Message, h.next) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (s *state) admit(level slog.Level, msg string, next slog.Handler) bool {
	k := kind{level, msg}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.kinds[k]
	if w == nil {
		if len(s.kinds) >= maxKinds {
			k = kind{level: level, msg: ""} // the shared allowance of every kind past the bound
			w = s.kinds[k]
		}
		if w == nil {
			w = &window{start: now}
			s.kinds[k] = w
		}
	}
	if now.Sub(w.start) >= s.interval && !w.pending {
		w.start, w.passed = now, 0
	}
	if w.passed < s.burst && !w.pending {
		w.passed++
		return true
	}
	w.suppressed++
	w.handler = next
	s.suppressed.WithLabelValues(level.String()).Inc()
	if !w.pending {
		w.pending = true
		s.after(max(s.interval-now.Sub(w.start), 0), func() { s.summarize(k) })
	}
	return false
}

// summarize writes the count of k's records suppressed in the interval that just ended, and
// opens a new interval.
func (s *state) summarize(k kind) {
	s.mu.Lock()
	w := s.kinds[k]
	if w == nil || w.suppressed == 0 {
		s.mu.Unlock()
		return
	}
	n, next, since := w.suppressed, w.handler, w.start
	w.suppressed, w.pending, w.handler = 0, false, nil
	w.start, w.passed = s.now(), 0
	s.mu.Unlock()

	msg := k.msg
	if msg == "" {
		msg = "(other messages)"
	}
	r := slog.NewRecord(s.now(), k.level, "log messages suppressed: "+msg, 0)
	r.AddAttrs(slog.Int("suppressed", n), slog.Duration("since", s.now().Sub(since).Round(time.Second)))
	_ = next.Handle(context.Background(), r)
}
