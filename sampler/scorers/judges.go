package scorers

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// WithJudges adds the judges of the `judges` config section to the LLM scorers (a scorer is
// built for a backend that only judges use) and records those scorers in set, so that
// JudgeSet.Prepare can change the judges on a reload. set may be nil.
func WithJudges(judges []config.Judge, set *JudgeSet) Option {
	return func(o *buildOptions) { o.judges, o.judgeSet = judges, set }
}

// JudgeSet holds the LLM scorers that score the configured judges, by backend.
type JudgeSet struct {
	mu      sync.Mutex
	scorers map[string]*llm.Scorer
	// scoring is set when Build filled the set: this process scores records.
	scoring bool
}

// NewJudgeSet returns an empty set for WithJudges to fill.
func NewJudgeSet() *JudgeSet { return &JudgeSet{scorers: map[string]*llm.Scorer{}} }

func (s *JudgeSet) add(backend string, sc *llm.Scorer) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scorers[backend] = sc
}

func (s *JudgeSet) markScoring() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scoring = true
}

// Prepare converts the judges of a new config (reading their examples files) and returns the
// commit that hands them to the running scorers. It fails, changing nothing, when a judge
// needs a backend no scorer was built for at start (that needs a restart) or a file cannot be
// read. Judges of an unchanged definition keep their version and cached steps.
func (s *JudgeSet) Prepare(judges []config.Judge, scoring config.Scoring) (commit func(), err error) {
	defs, err := JudgeDefs(judges, scoring)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range judges {
		b := j.JudgeBackend(scoring)
		// A process that does not score (worker pods do) accepts any judge: the pods read
		// theirs when they start.
		if s.scoring && s.scorers[b] == nil {
			return nil, fmt.Errorf("judges[%d]: backend %s was not running when ragwatch started; restart to add it", i, b)
		}
	}
	scorers := make(map[string]*llm.Scorer, len(s.scorers))
	for b, sc := range s.scorers {
		scorers[b] = sc
	}
	return func() {
		for b, sc := range scorers {
			if err := sc.SetJudges(defs[b]); err != nil {
				panic(err) // JudgeDefs validated every definition
			}
		}
		score.RegisterJudgeMetrics(judgeMetrics(judges)...)
	}, nil
}

// Versions returns every configured judge's metric and definition version.
func (s *JudgeSet) Versions() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, sc := range s.scorers {
		for m, v := range sc.JudgeVersions() {
			out[m] = v
		}
	}
	return out
}

func judgeMetrics(judges []config.Judge) []string {
	out := make([]string, len(judges))
	for i, j := range judges {
		out[i] = j.Metric()
	}
	return out
}

// JudgeDefs turns configured judges into G-Eval definitions grouped by backend.
func JudgeDefs(judges []config.Judge, scoring config.Scoring) (map[string][]llm.JudgeDef, error) {
	out := map[string][]llm.JudgeDef{}
	for i, j := range judges {
		d, err := judgeDef(j)
		if err != nil {
			return nil, fmt.Errorf("judges[%d] (%s): %w", i, j.Name, err)
		}
		b := j.JudgeBackend(scoring)
		out[b] = append(out[b], d)
	}
	return out, nil
}

func judgeDef(j config.Judge) (llm.JudgeDef, error) {
	lo, hi := j.Scale.Bounds()
	d := llm.JudgeDef{Metric: j.Metric(), Criteria: j.Criteria, Steps: j.Steps, Min: lo, Max: hi, Inputs: j.Inputs}
	exs, err := j.LoadExamples()
	if err != nil {
		return d, err
	}
	for _, e := range exs {
		ex := llm.Example{Question: e.Question, Context: e.Context, Answer: e.Answer, Reference: e.Reference, Score: *e.Score}
		for _, m := range e.History {
			ex.History = append(ex.History, record.Message{Role: m.Role, Content: m.Content})
		}
		d.Examples = append(d.Examples, ex)
	}
	if !isZeroMatch(j.When) || len(j.Variants) > 0 {
		scope, _ := json.Marshal(struct {
			When     config.SamplingMatch
			Variants []string
		}{j.When, j.Variants})
		d.Scope = string(scope)
		rule := decide.CompileRules([]config.SamplingRule{{Match: j.When}})[0]
		variants := slices.Clone(j.Variants)
		d.Applies = func(r *record.Record) bool {
			return rule.Matches(r) && (len(variants) == 0 || slices.Contains(variants, r.Variant))
		}
	}
	return d, d.Validate()
}

func isZeroMatch(m config.SamplingMatch) bool {
	return !m.NegativeFeedback && !m.EmptyRetrieval && m.TopScoreBelow == nil &&
		len(m.Services) == 0 && len(m.Routes) == 0 && len(m.Models) == 0
}
