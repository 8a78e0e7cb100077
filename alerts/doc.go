// Package alerts holds what the alert engine, the notifiers and the rule generator share: the
// Alert with its evidence, and the names of the metrics the engine exports.
package alerts
