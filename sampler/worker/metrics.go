package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/promreg"
)

// Attempt outcomes besides the score.Outcome* words a scorer reports.
const (
	OutcomeOK      = "ok"
	OutcomeInvalid = "invalid_result" // a result outside [0, 1] or without a metric, dropped
)

type metrics struct {
	evalScore *prometheus.HistogramVec
	byTurn    *prometheus.HistogramVec
	// evalWX and evalW are Σw·x and Σw of the scores (w = 1/p): their ratio is the weighted
	// mean, the estimate of the whole traffic's mean the dashboard shows.
	evalWX, evalW *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	attempts      *prometheus.CounterVec
	cost          *prometheus.CounterVec
	tokens        *prometheus.CounterVec
}

// EvalBuckets are the ragwatch_eval_score buckets: scores are in [0, 1].
var EvalBuckets = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		evalScore: promreg.MustRegister(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ragwatch_eval_score",
			Help:    "Scores of sampled records, and retrieval metrics of every record with relevance labels (0..1, higher is better), by service, variant and metric. Unweighted: weight by 1/p for estimates (docs/sampling.md).",
			Buckets: EvalBuckets,
		}, []string{"service", "variant", "metric"})),
		byTurn: promreg.MustRegister(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ragwatch_eval_score_by_turn",
			Help:    "Scores of sampled records whose turn is known, by service, metric and turn_bucket (1, 2, 3-5, 6+). Unweighted, like ragwatch_eval_score.",
			Buckets: EvalBuckets,
		}, []string{"service", "metric", "turn_bucket"})),
		evalWX: promreg.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_eval_score_weighted_sum_total",
			Help: "Sum of w·score over the scores of sampled records (w = 1/p, the record's weight), by service, variant and metric: divided by ragwatch_eval_score_weight_total, the traffic's mean score.",
		}, []string{"service", "variant", "metric"})),
		evalW: promreg.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_eval_score_weight_total",
			Help: "Sum of the weights w = 1/p of the scores of sampled records, by service, variant and metric.",
		}, []string{"service", "variant", "metric"})),
		duration: promreg.MustRegister(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ragwatch_scoring_duration_seconds",
			Help:    "Time one scorer took on one record, by scorer.",
			Buckets: []float64{0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"scorer"})),
		attempts: promreg.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_scoring_attempts_total",
			Help: "Scorer calls, by scorer and outcome (ok, timeout, rate_limited, parse_error, refused, error, invalid_result).",
		}, []string{"scorer", "outcome"})),
		cost: promreg.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_scoring_cost_usd_total",
			Help: "What scoring spent in US dollars, by judge model (priced from sampling.budget.prices, else as the scorer reported).",
		}, []string{"model"})),
		tokens: promreg.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_scoring_tokens_total",
			Help: "Tokens used by scoring, by judge model and direction (input, output).",
		}, []string{"model", "direction"})),
	}
}

// EvalScore returns the ragwatch_eval_score histogram the pools observe, registered on reg (or
// the one already there), for results scored outside a pool: the sampling stage's retrieval
// metrics.
func EvalScore(reg prometheus.Registerer) *prometheus.HistogramVec { return newMetrics(reg).evalScore }
