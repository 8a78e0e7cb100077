// Package engine evaluates SLOs and drift detectors over sliding windows of records, feedback
// and scores, runs each alert through pending → firing → resolved with `for`, hysteresis and
// `keep_firing_for`, attaches the worst requests as evidence, exports the SLO metrics, persists
// window state, and hands alerts to a Sink (the notify dispatcher) and to GET /api/v1/alerts.
//
// Judge agreement (alerts/judgeagreement), comparisons (alerts/comparison) and diagnosis
// (alerts/diagnosis) keep their own state under their own locks: the tracker feeds the
// engine's agreement SLOs (ObserveAgreement), the engine feeds and evaluates the comparisons,
// and the diagnoser's findings ride on every alert.
//
// Locking: Engine.mu guards all rule and instance state; consuming a record is a few map
// lookups and bucket additions under it. The comparison set's lock and the diagnoser's nest
// inside it (mu, then the set's, then the diagnoser's), never the other way round; the
// diagnoser is fed before mu is taken. Notification happens outside mu.
package engine
