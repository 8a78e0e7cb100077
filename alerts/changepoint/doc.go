// Package changepoint detects, sample by sample, a change of the mean of a metric bounded in
// [0,1] (docs/alerts.md#change-detection): a bank of one-sided CUSUM tests, one per size of
// change from the smallest worth paging for upwards, against a reference level learned from
// recent history. It keeps no clock and no alert state machine (see alerts/engine); its State
// is plain data the engine persists with the windows.
package changepoint
