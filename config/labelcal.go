package config

import "regexp"

// BuiltinScorer configures the builtin (no network) scorer beyond the metrics it scores.
type BuiltinScorer struct {
	// Calibration fits each service's own calibration map of a builtin metric from its team's
	// human labels (docs/scorer-quality.md#calibration-from-your-labels).
	Calibration LabelCalibration `yaml:"calibration"`
}

// LabelCalibration configures calibration from the team's own labels (sampler/labelcal). It is
// on by default: nothing happens until a (service, metric) holds min_labels labelled builtin
// scores, and a fitted map is applied only when it lowers the error on held-out labels beyond
// noise (the 95 % lower bound of the gain above 0) without lowering kappa. Read at start.
type LabelCalibration struct {
	Enabled bool `yaml:"enabled"`
	// MinLabels is the labelled builtin scores a (service, metric) needs before a first fit.
	MinLabels int `yaml:"min_labels"`
	// RefitEvery is the new labelled scores between two fits of a series (0: min_labels / 4).
	RefitEvery int `yaml:"refit_every"`
	// Folds of the cross-validation that decides whether a map is applied.
	Folds int `yaml:"folds"`
	// MaxPairs is the newest labelled scores kept per series (in memory, in the `run` process).
	MaxPairs int `yaml:"max_pairs"`
	// MaxSeries bounds the (service, metric) series; more are dropped and counted.
	MaxSeries int `yaml:"max_series"`
	// Bucket is the JetStream KV bucket that versions the maps; History the versions it keeps
	// per series.
	Bucket  string `yaml:"bucket"`
	History int    `yaml:"history"`
	// MaxBytes caps the bucket; a fit that does not fit is counted (store_failed) and the
	// previous version stays in use. A map fitted on 2000 pairs of continuous scores has about
	// 170 knots, ≈ 5 KB: max_series × history of them, 256 × 8 × 5 KB ≈ 10 MB, fit the default.
	MaxBytes int64 `yaml:"max_bytes"`
}

func defaultLabelCalibration() LabelCalibration {
	return LabelCalibration{Enabled: true, MinLabels: 200, Folds: 5, MaxPairs: 2000, MaxSeries: 256,
		Bucket: "ragwatch_labelcal", History: 8, MaxBytes: 16 << 20}
}

// bucketName is what a JetStream KV bucket name may hold.
var bucketName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Validate implements Validator.
func (c LabelCalibration) Validate() error {
	var errs []error
	if c.Folds < 2 || c.Folds > 20 {
		errs = append(errs, Invalid("folds", "must be in [2, 20], got %d", c.Folds))
	}
	if c.MinLabels < max(20, 2*c.Folds) {
		errs = append(errs, Invalid("min_labels", "must be at least 20 and twice folds, got %d", c.MinLabels))
	}
	if c.RefitEvery < 0 {
		errs = append(errs, Invalid("refit_every", "must not be negative, got %d", c.RefitEvery))
	}
	if c.MaxPairs < c.MinLabels {
		errs = append(errs, Invalid("max_pairs", "must be at least min_labels (%d), got %d", c.MinLabels, c.MaxPairs))
	}
	if c.MaxSeries <= 0 {
		errs = append(errs, Invalid("max_series", "must be positive, got %d", c.MaxSeries))
	}
	if !bucketName.MatchString(c.Bucket) {
		errs = append(errs, Invalid("bucket", "must be a JetStream KV bucket name (letters, digits, _ and -), got %q", c.Bucket))
	}
	if c.MaxBytes <= 0 {
		errs = append(errs, Invalid("max_bytes", "must be positive, got %d", c.MaxBytes))
	}
	if c.History < 1 || c.History > 64 {
		errs = append(errs, Invalid("history", "must be in [1, 64] (JetStream's limit), got %d", c.History))
	}
	return joinErrs(errs)
}
