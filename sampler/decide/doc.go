// Package decide chooses which records are scored: a consistent ratio by trace id (the
// OpenTelemetry consistent-probability rule), rules that raise or lower the probability, a
// token bucket and a daily cost budget. It also holds the weighted (1/p) estimators that keep
// aggregates over sampled scores unbiased.
package decide
