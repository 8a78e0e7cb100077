// Package compare is the math of online comparisons (canary, A/B): an always-valid
// confidence sequence for the difference of two weighted means, and the decision it gives
// against a non-inferiority margin. No config, no clock.
package compare
