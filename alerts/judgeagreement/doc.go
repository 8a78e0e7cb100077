// Package judgeagreement pairs human labels with the judge scores of the same record and
// metric, exports each judge's agreement with people (ragwatch_judge_agreement: MAE, Spearman,
// kappa, with confidence bounds), and feeds those statistics to the alert engine's SLOs on
// agreement_<statistic>_<metric>. The statistics themselves are internal/agreement's.
package judgeagreement
