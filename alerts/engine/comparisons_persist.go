package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/slo"
)

// A comparison's experiments survive restarts in the same store as SLO windows, one key per
// comparison: "comparison.<name in base64url>". They are restored only into a comparison whose
// test is defined the same way (definition): the sequence's guarantee holds for one definition.

type savedComparison struct {
	Version    int                                   `json:"version"`
	Definition string                                `json:"definition"`
	Arms       map[string]map[string]savedExperiment `json:"arms"` // service → candidate
}

type savedExperiment struct {
	Started time.Time            `json:"started"`
	Metrics map[string]savedPair `json:"metrics"`
	Machine Machine              `json:"machine"`
	Last    *alerts.Alert        `json:"last,omitempty"`
}

type savedPair struct {
	Baseline  slo.Sums  `json:"baseline"`
	Candidate slo.Sums  `json:"candidate"`
	Worst     slo.Worst `json:"worst"`
}

func comparisonKey(name string) string {
	return "comparison." + base64.RawURLEncoding.EncodeToString([]byte(name))
}

// definition names what the test of a comparison depends on.
func (cp *comparison) definition() string {
	d := cp.cfg
	b, _ := json.Marshal([]any{d.Metrics, d.Service, d.Baseline, d.Candidate, d.Margin, d.LowerIsBetter,
		d.Alpha, d.MinSamples, d.Window})
	return string(b)
}

// saveComparisons writes every comparison's experiments (Engine.Save).
func (e *Engine) saveComparisons(ctx context.Context) []error {
	if e.store == nil || e.cmp == nil {
		return nil
	}
	type item struct {
		key  string
		data []byte
	}
	var items []item
	var errs []error
	e.mu.Lock()
	for _, cp := range e.cmp.defs {
		s := savedComparison{Version: 1, Definition: cp.definition(), Arms: map[string]map[string]savedExperiment{}}
		for service, bySvc := range cp.arms {
			s.Arms[service] = map[string]savedExperiment{}
			for cand, ex := range bySvc {
				se := savedExperiment{Started: ex.started, Metrics: map[string]savedPair{}, Machine: ex.machine, Last: ex.last}
				for m, p := range ex.metrics {
					se.Metrics[m] = savedPair{Baseline: p.baseline, Candidate: p.candidate, Worst: p.worst}
				}
				s.Arms[service][cand] = se
			}
		}
		data, err := json.Marshal(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("encode comparison state %s: %w", cp.cfg.Name, err))
			continue
		}
		items = append(items, item{comparisonKey(cp.cfg.Name), data})
	}
	e.mu.Unlock()
	for _, it := range items {
		if err := e.store.Save(ctx, it.key, it.data); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// loadComparisons restores what saveComparisons wrote (Engine.Load).
func (e *Engine) loadComparisons(ctx context.Context) []error {
	if e.store == nil || e.cmp == nil {
		return nil
	}
	var errs []error
	e.mu.Lock()
	defs := append([]*comparison(nil), e.cmp.defs...)
	e.mu.Unlock()
	for _, cp := range defs {
		key := comparisonKey(cp.cfg.Name)
		data, err := e.store.Load(ctx, key)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var s savedComparison
		if err := json.Unmarshal(data, &s); err != nil || s.Version != 1 {
			e.logger.Warn("dropping unreadable comparison state", "key", key, "error", err)
			continue
		}
		if s.Definition != cp.definition() {
			e.logger.Warn("dropping comparison state of another definition", "comparison", cp.cfg.Name)
			continue
		}
		arms := map[string]map[string]*experiment{}
		for service, bySvc := range s.Arms {
			arms[service] = map[string]*experiment{}
			for cand, se := range bySvc {
				ex := &experiment{started: se.Started, metrics: map[string]*armPair{}, machine: se.Machine, last: se.Last}
				if ex.machine.Phase == "" {
					ex.machine.Phase = phaseInactive
				}
				if ex.last != nil {
					ex.last.Notifiers = cp.cfg.Notifiers
				}
				for m, p := range se.Metrics {
					if len(p.Worst) > slo.MaxEvidence {
						p.Worst = p.Worst[:slo.MaxEvidence]
					}
					ex.metrics[m] = &armPair{baseline: p.Baseline, candidate: p.Candidate, worst: p.Worst}
				}
				arms[service][cand] = ex
			}
		}
		e.mu.Lock()
		cp.arms = arms
		e.mu.Unlock()
	}
	return errs
}
