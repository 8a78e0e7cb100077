package config

import "time"

// Golden configures the golden-set canary of the judges: a file of records with human
// judgements that ragwatch re-judges on a schedule and whenever a judge's definition or model
// changes, to notice a judge that started scoring differently (docs/offline-eval.md).
type Golden struct {
	// File is the golden set: one record per line in the form `ragwatch eval` reads, each with
	// a unique trace_id and human judgements in labels.values. "" turns the canary off.
	File string `yaml:"file"`
	// Interval is the time between scheduled runs.
	Interval time.Duration `yaml:"interval"`
	// CheckInterval is how often the judges' versions are compared with the last run's.
	CheckInterval time.Duration `yaml:"check_interval"`
	// Tolerance is how far an item's judge value may move from the previous run's before the
	// item counts as changed (values are in [0, 1]).
	Tolerance float64 `yaml:"tolerance"`
	// MaxChanged is the share of a metric's items that may change before the judge drifted.
	MaxChanged float64 `yaml:"max_changed"`
	// MaxAgreementDrop is the largest fall of agreement (1 − mean absolute error against the
	// human judgements) from the previous run before the judge drifted.
	MaxAgreementDrop float64 `yaml:"max_agreement_drop"`
	// MinAgreement is a floor for agreement; 0 sets none.
	MinAgreement float64 `yaml:"min_agreement"`
	// Bucket is the JetStream KV bucket that keeps the previous run's answers.
	Bucket string `yaml:"bucket"`
	// MaxBytes caps Bucket (it holds one key: the last run's answers).
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxItems bounds the golden set read from File.
	MaxItems int `yaml:"max_items"`
}

func defaultGolden() Golden {
	return Golden{Interval: 24 * time.Hour, CheckInterval: time.Minute, Tolerance: 0.1, MaxChanged: 0.2,
		MaxAgreementDrop: 0.1, Bucket: "ragwatch_golden", MaxBytes: 4 << 20, MaxItems: 1000}
}

// Validate implements Validator.
func (g Golden) Validate() error {
	var errs []error
	if g.Interval < time.Minute {
		errs = append(errs, Invalid("interval", "must be at least 1m, got %v", g.Interval))
	}
	if g.CheckInterval <= 0 {
		errs = append(errs, Invalid("check_interval", "must be positive, got %v", g.CheckInterval))
	}
	for key, v := range map[string]float64{"tolerance": g.Tolerance, "max_changed": g.MaxChanged,
		"max_agreement_drop": g.MaxAgreementDrop, "min_agreement": g.MinAgreement} {
		if !(v >= 0 && v <= 1) {
			errs = append(errs, Invalid(key, "must be between 0 and 1, got %v", v))
		}
	}
	if g.Bucket == "" {
		errs = append(errs, Invalid("bucket", "must not be empty"))
	}
	if g.MaxBytes <= 0 {
		errs = append(errs, Invalid("max_bytes", "must be positive, got %d", g.MaxBytes))
	}
	if g.MaxItems <= 0 {
		errs = append(errs, Invalid("max_items", "must be positive, got %d", g.MaxItems))
	}
	return joinErrs(errs)
}
