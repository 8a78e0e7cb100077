// Package labelcal fits a service's own calibration map for a builtin metric from the human
// labels its team gives (POST /api/v1/labels): once a (service, metric) series holds enough
// labelled scores, it fits an isotonic map from score to label, measures agreement before and
// after on held-out labels by cross-validation, and applies the map only when it is better with
// 95 % confidence. Maps are versioned in JetStream KV and reversible.
package labelcal
