// Package slo computes what an SLO alerts on: the weighted (1/p) mean of a window with its 95%
// confidence interval for threshold SLOs, and good/bad ratios, burn rates and the remaining
// error budget for burn-rate SLOs. It keeps no clock and no state machine (see alerts/engine).
package slo
