// Package reqsignal is the one catalog of the request signals: what each is called, its unit,
// the Prometheus metric that shows it, and the one function from a record (or feedback) to its
// value, which the metrics (collector/signals) and the alert engine both read.
package reqsignal
