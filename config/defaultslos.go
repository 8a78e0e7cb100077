package config

import (
	"time"

	"github.com/prometheus/common/model"
)

// DefaultSLOs are the objectives ragwatch watches with no config file: the ones the builtin
// scorer and every record's signals can feed. docs/alerts.md#default-slos gives the reason
// behind each number. A config file's `slos:` replaces the whole list.
func DefaultSLOs() []SLO {
	f := func(v float64) *float64 { return &v }
	th := func(name, metric string, objective float64, below, above *float64, window time.Duration, minSamples int, forDur time.Duration, severity string) SLO {
		return SLO{Name: name, Kind: SLOThreshold, Metric: metric, Objective: objective, AlertBelow: below, AlertAbove: above,
			Window: model.Duration(window), MinSamples: minSamples, For: model.Duration(forDur),
			KeepFiringFor: max(model.Duration(forDur), model.Duration(time.Minute)), Severity: severity}
	}
	return []SLO{
		th("citation-precision", "citation_precision", 0.85, f(0.70), nil, 15*time.Minute, 30, 2*time.Minute, "page"),
		th("faithfulness", "faithfulness", 0.85, f(0.70), nil, 15*time.Minute, 30, 2*time.Minute, "page"),
		th("answer-relevancy", "answer_relevancy", 0.80, f(0.60), nil, 15*time.Minute, 30, 2*time.Minute, "ticket"),
		th("empty-retrieval-rate", "empty_retrieval_rate", 0.02, nil, f(0.10), 15*time.Minute, 100, 5*time.Minute, "ticket"),
		th("negative-feedback-rate", "negative_feedback_rate", 0.10, nil, f(0.30), time.Hour, 50, 10*time.Minute, "ticket"),
	}
}
