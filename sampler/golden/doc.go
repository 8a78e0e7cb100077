// Package golden is the judges' golden-set canary: a file of records with human judgements,
// re-judged on a schedule and whenever a judge's definition or model changes, so that a judge
// that silently started scoring differently is noticed (agreement with the people fell, or its
// answers on the same items moved). Each run's answers are kept for the next one to compare.
package golden
