package testutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The readers below take a Gatherer (a test's Registry) rather than a collector: the tests
// observe metrics the code under test registered itself. prometheus/testutil.ToFloat64 reads
// one collector and GatherAndCompare a whole exposition, but neither reads one series of a
// gathered family, which is what the assertions need.

// Sum adds the values of the series of family name in g whose labels include every pair in
// labels (nil: every series): a counter's, gauge's or untyped value, a histogram's or summary's
// observation count. It is 0 when there is no such series: a vector has no series until it is
// first used.
func Sum(tb testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	tb.Helper()
	var sum float64
	for _, m := range series(tb, g, name) {
		if !hasLabels(m, labels, false) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.GetSummary().GetSampleCount())
		}
	}
	return sum
}

// Series returns the series of family name in g whose labels are exactly labels, and fails tb
// when there is none. It serves histograms, summaries and exemplars, which Sum does not read.
func Series(tb testing.TB, g prometheus.Gatherer, name string, labels map[string]string) *dto.Metric {
	tb.Helper()
	for _, m := range series(tb, g, name) {
		if hasLabels(m, labels, true) {
			return m
		}
	}
	tb.Fatalf("no series %s%v", name, labels)
	return nil
}

func series(tb testing.TB, g prometheus.Gatherer, name string) []*dto.Metric {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// hasLabels reports whether m carries every pair in want and, when exact, no other label.
func hasLabels(m *dto.Metric, want map[string]string, exact bool) bool {
	// A label with an empty value is an absent label, as in Prometheus.
	if exact {
		n, w := 0, 0
		for _, lp := range m.GetLabel() {
			if lp.GetValue() != "" {
				n++
			}
		}
		for _, v := range want {
			if v != "" {
				w++
			}
		}
		if n != w {
			return false
		}
	}
	for k, v := range want {
		got := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k {
				got = lp.GetValue()
				break
			}
		}
		if got != v {
			return false
		}
	}
	return true
}
