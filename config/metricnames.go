package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ragwatch/ragwatch/internal/agreement"
	"github.com/ragwatch/ragwatch/internal/reqsignal"
	"github.com/ragwatch/ragwatch/internal/score"
)

// SignalMetrics are the per-request signals an SLO, drift detector or comparison can watch
// besides scored metrics: the signal catalog's names (docs/metrics-signals.md#the-signal-catalog).
var SignalMetrics = reqsignal.Names()

// DeprecatedMetrics maps an old metric name, still accepted, to the name to use.
var DeprecatedMetrics = reqsignal.Deprecated()

// MetricSources list the metric names a configuration produces, one function per kind of
// producer: scorers, signals, custom judges, and agreement with human labels.
var MetricSources = []func(c *Config) []string{scorerMetrics, signalMetrics, judgeMetrics, agreementMetrics, pairMetrics}

// ProducibleMetrics lists every metric name the configuration can produce: its scorers'
// metrics (the enabled ones, retrieval metrics at the configured k), the signals and what
// MetricSources add.
func ProducibleMetrics(c *Config) []string {
	var out []string
	for _, src := range MetricSources {
		for _, m := range src(c) {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

func scorerMetrics(c *Config) []string {
	out := c.Scoring.EnabledMetrics()
	if slices.Contains(out, score.AnswerRelevancy) {
		out = append(out, score.RefusalCorrect) // scored with answer_relevancy, for refusals
	}
	if c.Scoring.RetrievalEnabled() {
		out = append(out, score.MRR)
		for _, k := range c.Scoring.RetrievalK {
			for _, fam := range []string{score.PrecisionAt, score.RecallAt, score.NDCGAt, score.HitAt} {
				out = append(out, fam+strconv.Itoa(k))
			}
		}
	}
	return out
}

// signalMetrics are the signals, deprecated names included (still accepted).
func signalMetrics(*Config) []string {
	out := slices.Clone(SignalMetrics)
	for i := range reqsignal.All {
		if reqsignal.All[i].Deprecated != "" {
			out = append(out, reqsignal.All[i].Name)
		}
	}
	return out
}

// judgeMetrics are the metrics of the judges section: `judge_<name>` for each judge.
func judgeMetrics(c *Config) []string {
	out := make([]string, 0, len(c.Judges))
	for _, j := range c.Judges {
		out = append(out, "judge_"+j.Name)
	}
	return out
}

// pairMetrics is the outcome of judged shadow pairs (pairs.judge is always set): the win rate
// an SLO can watch, with `variant` naming the candidate.
func pairMetrics(*Config) []string { return []string{score.PairwiseWinRate} }

// AgreementStatistics name the statistics of a judge's agreement with human labels; the SLO
// metric agreement_<statistic>_<metric> watches one (docs/judges.md).
var AgreementStatistics = []string{agreement.MAE, agreement.Spearman, agreement.Kappa}

// agreementMetrics are agreement_<statistic>_<metric> for every scored metric and judge.
func agreementMetrics(c *Config) []string {
	var out []string
	for _, m := range append(scorerMetrics(c), judgeMetrics(c)...) {
		for _, st := range AgreementStatistics {
			out = append(out, "agreement_"+st+"_"+m)
		}
	}
	return out
}

// CheckMetricNames reports every SLO, drift detector and comparison whose metric the
// configuration cannot produce, an alert that could never fire, with the closest known name.
func CheckMetricNames(c *Config) error {
	known := ProducibleMetrics(c)
	var errs []error
	check := func(key, m string) {
		if m == "" || slices.Contains(known, m) {
			return
		}
		msg := fmt.Sprintf("%q is not a metric the configured scorers or signals produce", m)
		if score.KnownMetric(m) {
			msg = fmt.Sprintf("%q is not computed by the configured scoring (backend %s, metrics %v, retrieval_k %v)",
				m, c.Scoring.Backend, c.Scoring.Metrics, c.Scoring.RetrievalK)
		} else if s := closest(m, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		errs = append(errs, Invalid(key, "%s", msg))
	}
	for i, s := range c.SLOs {
		check(fmt.Sprintf("slos[%d].metric", i), s.Metric)
	}
	for i, d := range c.Drift.Detectors {
		check(fmt.Sprintf("drift.detectors[%d].signal", i), d.Signal)
	}
	for i, cmp := range c.Comparisons {
		for j, m := range cmp.Metrics {
			check(fmt.Sprintf("comparisons[%d].metrics[%d]", i, j), m)
		}
	}
	return joinErrs(errs)
}

// Deprecations lists the deprecated names the configuration uses, as warnings for
// `ragwatch validate`.
func Deprecations(c *Config) []string {
	var out []string
	warn := func(key, m string) {
		if n, ok := DeprecatedMetrics[m]; ok {
			out = append(out, fmt.Sprintf("`%s`: %q is deprecated, use %q", key, m, n))
		}
	}
	for i, s := range c.SLOs {
		warn(fmt.Sprintf("slos[%d].metric", i), s.Metric)
	}
	for i, d := range c.Drift.Detectors {
		warn(fmt.Sprintf("drift.detectors[%d].signal", i), d.Signal)
	}
	for i, cmp := range c.Comparisons {
		for j, m := range cmp.Metrics {
			warn(fmt.Sprintf("comparisons[%d].metrics[%d]", i, j), m)
		}
	}
	return out
}

// pruneDefaultSLOs drops, when the file sets no `slos:`, the default SLOs whose metric the
// configured scoring does not produce (a file that turns a metric off should not have to
// turn its default SLO off too).
func (c *Config) pruneDefaultSLOs(given bool) {
	if given {
		return
	}
	known := ProducibleMetrics(c)
	c.SLOs = slices.DeleteFunc(c.SLOs, func(s SLO) bool { return !slices.Contains(known, s.Metric) })
}

// closest is the known name nearest to m by edit distance, when near enough to be a typo
// (at most a third of the name's length, and 3).
func closest(m string, known []string) string {
	best, bestD := "", min(3, max(1, len(m)/3))+1
	for _, k := range known {
		if d := levenshtein(strings.ToLower(m), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
