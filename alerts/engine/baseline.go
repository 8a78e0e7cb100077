package engine

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/ragwatch/ragwatch/alerts/drift"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// BaselineFromRecords builds a pinned drift baseline from records (e.g. a JSONL export of
// known-good traffic) for the detectors of cfg (`drift:`).
func BaselineFromRecords(cfg config.Drift, records iter.Seq[*record.Record], source string, now time.Time) *drift.Baseline {
	b := drift.NewBuilder(driftDetectors(cfg.Detectors), source, now)
	for r := range records {
		EachSignal(r, func(name string, v float64) { b.Add(name, r.Service, v, 1) })
	}
	return b.Baseline()
}

// BaselineFromState pins what a running ragwatch currently sees: it reads the persisted window
// state from store and snapshots each detector's current window (drift.window) per service.
func BaselineFromState(ctx context.Context, cfg Sections, store Store, source string, now time.Time) (*drift.Baseline, error) {
	e, err := New(Options{Sections: cfg, Store: store, Now: func() time.Time { return now }, Baseline: &drift.Baseline{}})
	if err != nil {
		return nil, err
	}
	if err := e.Load(ctx); err != nil {
		return nil, err
	}
	b := drift.NewBuilder(driftDetectors(cfg.Drift.Detectors), source, now).Baseline()
	found := false
	for _, r := range e.rules {
		if r.det.Name == "" {
			continue
		}
		bd := b.Detectors[r.name]
		all := drift.NewHist(len(r.edges) + 1)
		for service, in := range r.instances {
			h := drift.NewHist(len(r.edges) + 1)
			in.Drift.Window(now, r.driftWindow, func(bk *driftBucket) { h.Merge(bk.H) })
			if h.N == 0 {
				continue
			}
			bd.Services[service] = h
			all.Merge(h)
			found = true
		}
		if all.N > 0 {
			bd.Services[drift.AllServices] = all
		}
	}
	if !found {
		return nil, fmt.Errorf("no drift window state found (is alerting.state_bucket set and ragwatch running with traffic?)")
	}
	return b, nil
}
