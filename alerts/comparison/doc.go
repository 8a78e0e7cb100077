// Package comparison runs the online comparisons of the `comparisons:` section (canary, A/B):
// per comparison, service and candidate variant, the experiments' weighted sums, the tests of
// alerts/compare on them, the RagwatchCandidateWorse alerts through the shared alert
// lifecycle, the ragwatch_comparison_* gauges, GET /api/v1/comparisons' statuses, and the
// state the alert engine persists. alerts/compare is the pure math; this package holds the
// state, under its own lock. The alert engine feeds it and evaluates it.
package comparison
