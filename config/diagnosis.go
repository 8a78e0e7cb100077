package config

import (
	"math"
	"time"

	"github.com/prometheus/common/model"
)

// Diagnosis configures alerting.diagnosis: how the alert engine reads the metric pairs
// (faithfulness and answer relevancy, context recall and faithfulness, precision@k and NDCG@k,
// context precision and hit@k, the top retrieval score and citation precision) to say why an
// alert fires (docs/alerts.md#diagnosis).
type Diagnosis struct {
	// Low and High: a pair diverges when one weighted mean is below Low and the other above High.
	Low  float64 `yaml:"low"`
	High float64 `yaml:"high"`
	// MinSamples is the fewest values a mean (and a pair's correlation) needs to count.
	MinSamples int `yaml:"min_samples"`
	// Drop is the fall, between the older and newer half of Window, that makes a trend.
	Drop float64 `yaml:"drop"`
	// Window is how far back the statistics reach.
	Window model.Duration `yaml:"window"`
}

func defaultDiagnosis() Diagnosis {
	return Diagnosis{Low: 0.6, High: 0.8, MinSamples: 20, Drop: 0.1, Window: model.Duration(15 * time.Minute)}
}

// Validate implements Validator.
func (d Diagnosis) Validate() error {
	var errs []error
	in01 := func(v float64) bool { return v >= 0 && v <= 1 && !math.IsNaN(v) }
	if !in01(d.Low) {
		errs = append(errs, Invalid("low", "must be in [0, 1], got %v", d.Low))
	}
	if !in01(d.High) {
		errs = append(errs, Invalid("high", "must be in [0, 1], got %v", d.High))
	} else if in01(d.Low) && d.High <= d.Low {
		errs = append(errs, Invalid("high", "must be above low (%v), got %v", d.Low, d.High))
	}
	if d.MinSamples < 1 {
		errs = append(errs, Invalid("min_samples", "must be at least 1"))
	}
	if !(d.Drop > 0 && d.Drop < 1) {
		errs = append(errs, Invalid("drop", "must be in (0, 1), got %v", d.Drop))
	}
	if d.Window < model.Duration(time.Minute) {
		errs = append(errs, Invalid("window", "must be at least 1m"))
	}
	return joinErrs(errs)
}
