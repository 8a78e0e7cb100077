// Package changepoint detects, sample by sample, a change of the mean of a metric bounded in
// [0,1] (docs/alerts.md#change-detection): a bank of one-sided CUSUM tests, one per size of
// change from the smallest worth paging for upwards, against a reference level learned from
// recent history. Each test adds the log of a bet's wealth factor 1 + λ(x − q0), a martingale
// under any bounded distribution of mean q0, so the false-alarm bound needs no model of the
// values; for 0/1 values it is the likelihood ratio itself. It keeps no clock and no alert state machine (see alerts/engine); its State
// is plain data the engine persists with the windows.
package changepoint
