package config

import (
	"fmt"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Comparison is an online comparison of a candidate variant against a baseline (a canary or an
// A/B test): the weighted difference of their means per metric, watched with an always-valid
// sequential test so that looking at every tick does not inflate false alarms
// (docs/variants.md).
type Comparison struct {
	Name    string   `yaml:"name"`
	Metrics []string `yaml:"metrics"`
	Service string   `yaml:"service"` // only this service; "" = each service separately
	// Baseline is the reference variant; Candidate the variant under test, "" = every other
	// variant against the baseline.
	Baseline  string `yaml:"baseline"`
	Candidate string `yaml:"candidate"`
	// Margin is the non-inferiority margin: the candidate is worse when its mean is below the
	// baseline's by more than Margin (above, with LowerIsBetter), in the metric's unit.
	Margin float64 `yaml:"margin"`
	// LowerIsBetter is for metrics where a lower mean is better (latency_seconds,
	// empty_retrieval_rate, ...); scores are higher-is-better.
	LowerIsBetter bool           `yaml:"lower_is_better"`
	Alpha         float64        `yaml:"alpha"`
	MinSamples    int            `yaml:"min_samples"`
	Window        model.Duration `yaml:"window"`

	Severity     string            `yaml:"severity"` // page | ticket | info
	Labels       map[string]string `yaml:"labels"`
	RunbookURL   SecretURL         `yaml:"runbook_url"`
	DashboardURL SecretURL         `yaml:"dashboard_url"`
	Notifiers    []string          `yaml:"notifiers"` // none = all
}

// UnmarshalYAML fills defaults before decoding.
func (c *Comparison) UnmarshalYAML(n *yaml.Node) error {
	type plain Comparison
	p := plain{Margin: 0.02, Alpha: 0.05, MinSamples: 100, Severity: "ticket"}
	if err := n.Decode(&p); err != nil {
		return err
	}
	*c = Comparison(p)
	return nil
}

// Validate implements Validator.
func (c Comparison) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, Invalid("name", "is required"))
	}
	if len(c.Metrics) == 0 {
		errs = append(errs, Invalid("metrics", "needs at least one metric"))
	}
	if c.Baseline == "" {
		errs = append(errs, Invalid("baseline", "is required"))
	}
	if c.Candidate != "" && c.Candidate == c.Baseline {
		errs = append(errs, Invalid("candidate", "must differ from the baseline %q", c.Baseline))
	}
	if !(c.Margin >= 0 && c.Margin < 1e9) {
		errs = append(errs, Invalid("margin", "must be a non-negative number, got %v", c.Margin))
	}
	if !(c.Alpha > 0 && c.Alpha < 0.5) {
		errs = append(errs, Invalid("alpha", "must be in (0, 0.5), got %v", c.Alpha))
	}
	if c.MinSamples < 1 {
		errs = append(errs, Invalid("min_samples", "must be at least 1"))
	}
	switch c.Severity {
	case "page", "ticket", "info":
	default:
		errs = append(errs, Invalid("severity", "must be page, ticket or info, got %q", c.Severity))
	}
	return joinErrs(errs)
}

// String names the comparison in logs.
func (c Comparison) String() string {
	return fmt.Sprintf("%s (%s vs %s)", c.Name, c.Candidate, c.Baseline)
}

// checkComparisons reports comparison names used twice and notifiers that do not exist
// (CheckAlertRefs).
func checkComparisons(c *Config, checkNotifiers func(prefix string, refs []string)) []error {
	var errs []error
	seen := map[string]bool{}
	for i, cp := range c.Comparisons {
		if seen[cp.Name] {
			errs = append(errs, Invalid(fmt.Sprintf("comparisons[%d].name", i), "%q is used twice", cp.Name))
		}
		seen[cp.Name] = true
		checkNotifiers(fmt.Sprintf("comparisons[%d]", i), cp.Notifiers)
	}
	return errs
}
