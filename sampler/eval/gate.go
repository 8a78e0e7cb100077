package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
)

// GateRule is one metric's deploy condition: an absolute floor for the run's mean, and the
// largest fall of the mean below the baseline's. Either may be absent.
type GateRule struct {
	Min     *float64 `json:"min,omitempty"`
	MaxDrop *float64 `json:"max_drop,omitempty"`
}

// Gate maps metric names to their rules: {"faithfulness": {"min": 0.8, "max_drop": 0.02}}.
type Gate map[string]GateRule

// ReadGate reads and checks a gate file: strict JSON, every value in [0, 1], at least one rule.
func ReadGate(path string) (Gate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read gate: %w", err)
	}
	var g Gate
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("gate %s: %w", path, err)
	}
	if len(g) == 0 {
		return nil, fmt.Errorf("gate %s holds no metrics", path)
	}
	var errs []error
	for _, m := range sortedKeys(g) {
		r := g[m]
		if r.Min == nil && r.MaxDrop == nil {
			errs = append(errs, fmt.Errorf("gate %s: %s: needs `min` or `max_drop`", path, m))
		}
		for key, v := range map[string]*float64{"min": r.Min, "max_drop": r.MaxDrop} {
			if v != nil && (math.IsNaN(*v) || *v < 0 || *v > 1) {
				errs = append(errs, fmt.Errorf("gate %s: %s: `%s` must be between 0 and 1, got %v", path, m, key, *v))
			}
		}
	}
	return g, errors.Join(errs...)
}

// NeedsBaseline reports whether some rule sets max_drop, which compares with a baseline.
func (g Gate) NeedsBaseline() bool {
	for _, r := range g {
		if r.MaxDrop != nil {
			return true
		}
	}
	return false
}

// Check is the deploy decision: no gated metric falls below its floor, none falls below the
// baseline by more than its tolerance. With a baseline (nil: none), every baseline metric is
// checked against the gate's max_drop for it, else defaultDrop. It returns one message per
// failure naming the metric and why, in metric order; empty means deploy.
func (r *Report) Check(base *Baseline, gate Gate, defaultDrop float64) []string {
	cur := map[string]Summary{}
	for _, s := range r.Metrics {
		cur[s.Metric] = s
	}
	names := map[string]bool{}
	for m := range gate {
		names[m] = true
	}
	if base != nil {
		for m := range base.Metrics {
			names[m] = true
		}
	}
	var fails []string
	for _, m := range sortedKeys(names) {
		rule := gate[m]
		c, ok := cur[m]
		if !ok || c.N == 0 {
			fails = append(fails, fmt.Sprintf("%s: missing from this run", m))
			continue
		}
		// Round to 1e-9 so a value exactly at a limit passes despite float noise.
		if rule.Min != nil && math.Round(c.Mean*1e9) < math.Round(*rule.Min*1e9) {
			fails = append(fails, fmt.Sprintf("%s: mean %.4f is below the floor %.4f", m, c.Mean, *rule.Min))
		}
		if base == nil {
			continue
		}
		b, inBase := base.Metrics[m]
		maxDrop := defaultDrop
		if rule.MaxDrop != nil {
			maxDrop = *rule.MaxDrop
		}
		if !inBase {
			if rule.MaxDrop != nil {
				fails = append(fails, fmt.Sprintf("%s: max_drop set but the baseline has no value", m))
			}
			continue
		}
		if drop := b.Mean - c.Mean; math.Round(drop*1e9) > math.Round(maxDrop*1e9) {
			fails = append(fails, fmt.Sprintf("%s: dropped %.4f (%.4f -> %.4f, allowed %.4f)", m, drop, b.Mean, c.Mean, maxDrop))
		}
	}
	return fails
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
