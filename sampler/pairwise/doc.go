// Package pairwise is what the pairwise judges, the online pair path and `ragwatch eval
// --pairwise` share: a verdict on two answers to one request, the position-swap rule, the
// orientation of a pair by the configured comparisons, and the weighted win rate with its
// Wilson interval (docs/pairwise.md).
package pairwise
