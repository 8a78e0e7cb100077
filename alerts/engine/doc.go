// Package engine evaluates SLOs and drift detectors over sliding windows of records, feedback
// and scores, runs each alert through pending → firing → resolved with `for`, hysteresis and
// `keep_firing_for`, attaches the worst requests as evidence, exports the SLO metrics, persists
// window state, and hands alerts to a Sink (the notify dispatcher) and to GET /api/v1/alerts.
//
// Locking: one mutex (Engine.mu) guards all rule and instance state; consuming a record is a
// few map lookups and bucket additions under it. Notification happens outside it.
package engine
