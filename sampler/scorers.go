package sampler

import (
	"fmt"
	"slices"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/sampler/score"
	"github.com/ragwatch/ragwatch/sampler/score/builtin"
	"github.com/ragwatch/ragwatch/sampler/score/retrieval"
)

// Scorers builds the scorers that `ragwatch run` and `ragwatch worker` run, from
// cfg.Scoring: the builtin scorer for the enabled metrics routed to the builtin backend and
// the retrieval metrics for records with relevance labels. It is the one place both commands
// get their scorers from; metrics routed to an LLM or NLI backend are built by the scoring
// engine's builder, and until that is wired here they are reported as an error rather than
// silently left unscored.
func Scorers(cfg *config.Config) ([]score.Scorer, error) {
	var out []score.Scorer
	var builtinMetrics, other []string
	for _, m := range cfg.Scoring.EnabledMetrics() {
		if cfg.Scoring.MetricBackend(m) == config.BackendBuiltin {
			if slices.Contains(builtin.MetricNames, m) {
				builtinMetrics = append(builtinMetrics, m)
			}
			continue
		}
		other = append(other, m)
	}
	if len(other) > 0 {
		return nil, fmt.Errorf("metrics %v need the %s backend, which this build does not wire yet", other, cfg.Scoring.MetricBackend(other[0]))
	}
	if len(builtinMetrics) > 0 {
		out = append(out, builtin.New(builtin.Options{Metrics: builtinMetrics}))
	}
	if cfg.Scoring.RetrievalEnabled() {
		keep := func(string) bool { return true }
		if len(cfg.Scoring.Metrics) > 0 {
			// "ndcg@10" keeps that cut-off; "ndcg@k" keeps every configured one.
			keep = func(m string) bool {
				return slices.Contains(cfg.Scoring.Metrics, m) || slices.Contains(cfg.Scoring.Metrics, retrievalFamily(m)+"@k")
			}
		}
		out = append(out, retrieval.New(cfg.Scoring.RetrievalK, keep))
	}
	return out, nil
}

func retrievalFamily(m string) string {
	for i := range m {
		if m[i] == '@' {
			return m[:i]
		}
	}
	return m
}
