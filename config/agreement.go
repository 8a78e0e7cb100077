package config

import (
	"time"

	"github.com/prometheus/common/model"
)

// Agreement configures how the alert engine measures its judges against human labels
// (alerting.agreement): the window of (label, score) pairs each statistic is computed over, how
// many pairs it needs, and the bounds on what it remembers while a label or a score waits for
// the other.
type Agreement struct {
	// Window is how far back pairs count; MaxPairs caps them per metric and judge.
	Window   model.Duration `yaml:"window"`
	MaxPairs int            `yaml:"max_pairs"`
	// MinSamples is the number of pairs below which no agreement is exported or observed.
	MinSamples int `yaml:"min_samples"`
	// MaxRecords bounds the records whose scores (or labels) are kept waiting for the other.
	MaxRecords int `yaml:"max_records"`
	// MaxSeries bounds the (metric, judge) pairs measured.
	MaxSeries int `yaml:"max_series"`
}

func defaultAgreement() Agreement {
	return Agreement{
		Window:     model.Duration(7 * 24 * time.Hour),
		MaxPairs:   1000,
		MinSamples: 30,
		MaxRecords: 10000,
		MaxSeries:  64,
	}
}

// Validate implements Validator.
func (a Agreement) Validate() error {
	var errs []error
	if a.Window <= 0 {
		errs = append(errs, Invalid("window", "must be positive"))
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"max_pairs", a.MaxPairs}, {"min_samples", a.MinSamples}, {"max_records", a.MaxRecords}, {"max_series", a.MaxSeries}} {
		if f.v <= 0 {
			errs = append(errs, Invalid(f.key, "must be positive, got %d", f.v))
		}
	}
	if a.MaxRecords > MaxHeldRecords {
		errs = append(errs, Invalid("max_records", "must be at most %d, got %d", MaxHeldRecords, a.MaxRecords))
	}
	if a.MinSamples > a.MaxPairs && a.MaxPairs > 0 {
		errs = append(errs, Invalid("min_samples", "must not exceed max_pairs (%d)", a.MaxPairs))
	}
	return joinErrs(errs)
}
