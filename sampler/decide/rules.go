package decide

import (
	"slices"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// Reasons used as the `reason` label besides rule names.
const (
	ReasonRate      = "rate"       // sampled (or skipped) by sampling.rate
	ReasonRateLimit = "rate_limit" // skipped: sampling.max_per_minute reached
	ReasonBudget    = "budget"     // skipped: the day's budget is spent
	ReasonRule      = "rule"       // skipped: a never rule matched
	ReasonNoContent = "no_content" // skipped: the record's content is gone (late feedback, Record.Elided)
	// ReasonLabelled samples every record that carries human labels, with probability 1, before
	// any configured rule: the labels are only useful next to the judges' scores.
	ReasonLabelled = "labelled"
)

// Rule is a compiled sampling rule.
type Rule struct {
	Name        string
	Probability float64
	Never       bool
	match       config.SamplingMatch
}

// CompileRules turns the configured rules into Rules, in order.
func CompileRules(rules []config.SamplingRule) []Rule {
	out := make([]Rule, 0, len(rules))
	for _, r := range rules {
		c := Rule{Name: r.Name, Never: r.Never, match: r.Match}
		if r.Probability != nil {
			c.Probability = *r.Probability
		}
		out = append(out, c)
	}
	return out
}

// Matches reports whether every condition of the rule holds for r.
func (r Rule) Matches(rec *record.Record) bool {
	m := r.match
	if m.NegativeFeedback && (rec.Feedback == nil || rec.Feedback.Score >= 0) {
		return false
	}
	if m.EmptyRetrieval && !rec.EmptyRetrieval() {
		return false
	}
	if m.TopScoreBelow != nil {
		if top, _, n := rec.ScoreStats(); n == 0 || top >= *m.TopScoreBelow {
			return false
		}
	}
	if len(m.Services) > 0 && !slices.Contains(m.Services, rec.Service) {
		return false
	}
	if len(m.Routes) > 0 && !slices.Contains(m.Routes, Route(rec)) {
		return false
	}
	if len(m.Models) > 0 && !slices.Contains(m.Models, rec.Model) {
		return false
	}
	return true
}

// Route returns the record's route: attribute `route`, else `http.route`.
func Route(r *record.Record) string {
	if v, ok := r.Attributes["route"]; ok {
		return v
	}
	return r.Attributes["http.route"]
}
