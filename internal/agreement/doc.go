// Package agreement measures how closely a judge's scores follow human labels: mean absolute
// error, Spearman's rank correlation and Cohen's kappa at a threshold, each with a 95%
// confidence interval, over a bounded window of (human, judge) pairs. Pure math, no config.
package agreement
