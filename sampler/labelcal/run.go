package labelcal

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ragwatch/ragwatch/internal/score"
)

// Scorer is the score.Result.Scorer whose results a Learner calibrates: the builtin scorer.
const Scorer = "builtin"

// storeTimeout bounds one store write of a fit.
const storeTimeout = 10 * time.Second

// DefaultQueue is the default bound of the pairs waiting for Run (LearnerOptions.Queue).
const DefaultQueue = 1024

// Calibrate maps, in place, every builtin result of a series whose newest map is applied and
// not reverted: Value becomes the calibrated value, Raw keeps the scorer's own, Calibration
// names the map's version. Results already calibrated (Raw set) or of other scorers pass
// unchanged. It is the scoring workers' step after the scorers ran, in `ragwatch run` and in
// `ragwatch worker` pods alike.
func (l *Learner) Calibrate(results []score.Result) {
	if l == nil {
		return
	}
	p := l.inUse.Load()
	if p == nil || len(*p) == 0 {
		return
	}
	for i := range results {
		x := &results[i]
		if x.Scorer != Scorer || x.Raw != nil {
			continue
		}
		m := (*p)[seriesKey{x.Service, x.Metric}]
		if m == nil {
			continue
		}
		raw := x.Value
		x.Raw = &raw
		x.Value = m.Apply(raw)
		x.Calibration = m.Version
	}
}

// pairIn is one labelled builtin score waiting for Run.
type pairIn struct {
	service, metric string
	p               Pair
}

// Offer queues a labelled builtin score for the fitting goroutine (Start) without blocking:
// raw is the scorer's own value (score.Result.RawValue), human the label. A full queue drops
// the pair and counts it (reason queue_full). It has the signature of
// judgeagreement.Options.OnPair; pairs of other judges are ignored.
func (l *Learner) Offer(service, metric, judge string, human, raw float64) {
	if judge != Scorer {
		return
	}
	select {
	case l.in <- pairIn{service, metric, Pair{Score: raw, Label: human}}:
	default:
		l.dropped.WithLabelValues("queue_full").Inc()
	}
}

// Start loads the stored maps, then runs, until Shutdown, the goroutine that fits the offered
// pairs and a watch on the store that adopts versions other processes store (a fit in another
// replica, a revert through another one's API), so that `ragwatch worker` pods apply a new
// version as it is stored. A failed load is logged; the maps come with the watch.
func (l *Learner) Start(ctx context.Context) error {
	l.runMu.Lock()
	defer l.runMu.Unlock()
	if l.cancel != nil {
		return errors.New("label calibration already started")
	}
	if err := l.Load(ctx); err != nil {
		l.o.Logger.Warn("label calibration: loading the stored maps failed; they come with the watch", "err", err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	l.wg.Add(1)
	go l.fit(rctx)
	if l.o.Store != nil {
		w, err := l.o.Store.KV.WatchAll(rctx, jetstream.UpdatesOnly())
		if err != nil {
			l.o.Logger.Warn("label calibration: cannot watch the stored maps; this process keeps those it loaded", "err", err)
		} else {
			l.wg.Add(1)
			go l.watch(rctx, w)
		}
	}
	return nil
}

// Shutdown stops the goroutines; pairs still queued are dropped (they are collected again).
// Idempotent and safe without Start.
func (l *Learner) Shutdown(ctx context.Context) error {
	l.runMu.Lock()
	defer l.runMu.Unlock()
	if l.cancel == nil {
		return nil
	}
	l.cancel()
	l.cancel = nil
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Learner) fit(ctx context.Context) {
	defer l.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case in := <-l.in:
			octx, cancel := context.WithTimeout(ctx, storeTimeout)
			m, err := l.Observe(octx, in.service, in.metric, in.p)
			cancel()
			if err != nil && ctx.Err() == nil {
				l.o.Logger.Warn("label calibration: a pair was not used", "metric", in.metric, "err", err)
			}
			if m != nil {
				l.o.Logger.Info("label calibration: fitted", "metric", m.Metric, "version", m.Version, "labels", m.Labels,
					"applied", m.Applied, "reverted", m.Reverted, "mse_before", m.Before.MSE, "mse_after", m.After.MSE)
			}
		}
	}
}

func (l *Learner) watch(ctx context.Context, w jetstream.KeyWatcher) {
	defer l.wg.Done()
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			m, err := decode(e)
			if err != nil {
				l.o.Logger.Warn("label calibration: a stored map does not decode; skipped", "err", err)
				continue
			}
			l.adopt(m)
		}
	}
}

// adopt makes m its series' newest version when it is newer than the one held.
func (l *Learner) adopt(m Map) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.seriesOf(seriesKey{m.Service, m.Metric})
	if s == nil {
		l.dropped.WithLabelValues("series_limit").Inc()
		return
	}
	if s.current == nil || m.Version > s.current.Version {
		s.current = &m
		l.publish()
	}
}
