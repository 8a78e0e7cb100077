package comparison

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/internal/lifecycle"
	"github.com/ragwatch/ragwatch/alerts/slo"
)

// A comparison's experiments survive restarts in the alert engine's store, one key per
// comparison: "comparison.<name in base64url>" (Key). They are restored only into a comparison
// whose test is defined the same way (definition): the sequence's guarantee holds for one
// definition. The JSON form is the persisted format of the ragwatch_alerts bucket; a change is
// a new Version that still reads the old ones (alerts/engine TestAlertStateWireFormat).
//
// Version 1 kept one alert a candidate (its first worse metric), in the experiment's machine
// and last; version 2 keeps each metric's alert with the metric. A version 1 alert is restored
// onto the metric it names.

// Saved is one comparison's saved state.
type Saved struct {
	Version    int                                   `json:"version"`
	Definition string                                `json:"definition"`
	Arms       map[string]map[string]savedExperiment `json:"arms"` // service → candidate
}

type savedExperiment struct {
	Started time.Time            `json:"started"`
	Metrics map[string]savedPair `json:"metrics"`
	// Machine and Last: version 1 only.
	Machine *lifecycle.Machine `json:"machine,omitempty"`
	Last    *alerts.Alert      `json:"last,omitempty"`
}

type savedPair struct {
	Baseline  slo.Sums  `json:"baseline"`
	Candidate slo.Sums  `json:"candidate"`
	Worst     slo.Worst `json:"worst"`
	// Machine and Last are the metric's alert (version 2); nil while it never left inactive.
	Machine *lifecycle.Machine `json:"machine,omitempty"`
	Last    *alerts.Alert      `json:"last,omitempty"`
}

// SavedVersion is the version Snapshot writes; Restore reads it and every earlier one.
const SavedVersion = 2

// Key is the store key of a comparison's state.
func Key(name string) string {
	return "comparison." + base64.RawURLEncoding.EncodeToString([]byte(name))
}

// definition names what the test of a comparison depends on.
func (cp *comparison) definition() string {
	d := cp.cfg
	b, _ := json.Marshal([]any{d.Metrics, d.Service, d.Baseline, d.Candidate, d.Margin, d.LowerIsBetter,
		d.Alpha, d.MinSamples, d.Window})
	return string(b)
}

// ErrOtherDefinition is Restore's answer to state saved for a test defined differently.
var ErrOtherDefinition = errors.New("comparison state of another definition")

// Snapshot returns every comparison's state, by comparison name.
func (c *Set) Snapshot() map[string]Saved {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]Saved, len(c.defs))
	for _, cp := range c.defs {
		s := Saved{Version: SavedVersion, Definition: cp.definition(), Arms: map[string]map[string]savedExperiment{}}
		for service, bySvc := range cp.arms {
			s.Arms[service] = map[string]savedExperiment{}
			for cand, ex := range bySvc {
				se := savedExperiment{Started: ex.started, Metrics: map[string]savedPair{}}
				for m, p := range ex.metrics {
					sp := savedPair{Baseline: p.baseline, Candidate: p.candidate, Worst: p.worst, Last: p.last}
					if p.machine.Phase != lifecycle.Inactive || p.last != nil {
						mc := p.machine
						sp.Machine = &mc
					}
					se.Metrics[m] = sp
				}
				s.Arms[service][cand] = se
			}
		}
		out[cp.cfg.Name] = s
	}
	return out
}

// Names lists the configured comparisons, whose state Restore takes.
func (c *Set) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.defs))
	for _, cp := range c.defs {
		out = append(out, cp.cfg.Name)
	}
	return out
}

// Restore puts back what Snapshot returned for comparison name: nothing when the comparison is
// gone, ErrOtherDefinition (and nothing) when its test is now defined differently.
func (c *Set) Restore(name string, s Saved) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var cp *comparison
	for _, d := range c.defs {
		if d.cfg.Name == name {
			cp = d
		}
	}
	if cp == nil {
		return nil
	}
	if s.Definition != cp.definition() {
		return ErrOtherDefinition
	}
	arms := map[string]map[string]*experiment{}
	for service, bySvc := range s.Arms {
		arms[service] = map[string]*experiment{}
		for cand, se := range bySvc {
			ex := &experiment{started: se.Started, metrics: map[string]*armPair{}}
			for m, p := range se.Metrics {
				if len(p.Worst) > slo.MaxEvidence {
					p.Worst = p.Worst[:slo.MaxEvidence]
				}
				ap := ex.pair(m)
				ap.baseline, ap.candidate, ap.worst = p.Baseline, p.Candidate, p.Worst
				restoreAlert(ap, p.Machine, p.Last, cp)
			}
			// Version 1: the one alert of the candidate goes to the metric it names. A
			// pending machine without an alert is dropped (comparisons fire without a hold).
			if se.Last != nil && se.Last.Metric != "" {
				restoreAlert(ex.pair(se.Last.Metric), se.Machine, se.Last, cp)
			}
			arms[service][cand] = ex
		}
	}
	cp.arms = arms
	return nil
}

// restoreAlert puts a saved metric alert back onto p.
func restoreAlert(p *armPair, m *lifecycle.Machine, last *alerts.Alert, cp *comparison) {
	if m != nil {
		p.machine = *m
	}
	if p.machine.Phase == "" {
		p.machine.Phase = lifecycle.Inactive
	}
	p.last = last
	if p.last != nil {
		p.last.Notifiers = cp.cfg.Notifiers
	}
}
