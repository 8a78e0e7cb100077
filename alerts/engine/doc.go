// Package engine evaluates SLOs and drift detectors over sliding windows of records, feedback
// and scores, runs each alert through pending → firing → resolved with `for`, hysteresis and
// `keep_firing_for`, attaches the worst requests as evidence, exports the SLO metrics, persists
// window state, and hands alerts to a Sink (the notify dispatcher) and to GET /api/v1/alerts.
//
// Judge agreement (alerts/judgeagreement) and diagnosis (alerts/diagnosis) keep their own state
// under their own locks: the tracker feeds the engine's agreement SLOs (ObserveAgreement), the
// diagnoser's findings ride on every alert.
//
// Locking: Engine.mu guards all rule, instance and comparison state; consuming a record is a
// few map lookups and bucket additions under it. The diagnoser is fed before mu is taken and
// read with it held (its lock nests inside mu, never the other way round). Notification
// happens outside mu.
package engine
