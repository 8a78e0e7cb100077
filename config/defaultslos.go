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
	// The quality scores are watched by change detection (docs/alerts.md#change-detection): a
	// drop of 0.10 or more pages within ln(γ)/D samples, one false alarm a month per series.
	change := func(name, metric string, objective float64, severity string) SLO {
		return SLO{Name: name, Kind: SLOChange, Metric: metric, Objective: objective, Direction: DirectionDown,
			MinShift: 0.10, FalseAlarms: DefaultFalseAlarms(), Reference: model.Duration(3 * time.Hour), MinSamples: 30,
			KeepFiringFor: model.Duration(time.Minute), Severity: severity}
	}
	return []SLO{
		change("citation-precision", "citation_precision", 0.85, "page"),
		// A change detector pages on a drop from the service's own level; a service whose
		// citations were never good enough has none. The floor pages on the level itself.
		th("citation-precision-floor", "citation_precision", 0.85, f(0.70), nil, 15*time.Minute, 30, 2*time.Minute, "page"),
		change("faithfulness", "faithfulness", 0.85, "page"),
		change("answer-relevancy", "answer_relevancy", 0.80, "ticket"),
		th("empty-retrieval-rate", "empty_retrieval_rate", 0.02, nil, f(0.10), 15*time.Minute, 100, 5*time.Minute, "ticket"),
		th("negative-feedback-rate", "negative_feedback_rate", 0.10, nil, f(0.30), time.Hour, 50, 10*time.Minute, "ticket"),
	}
}
