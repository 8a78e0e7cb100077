package config

// Scoring configures the scoring queue and workers (ScoringRuntime, sampling.go) and the
// scorers and their backends (ScoringEngine, this file). Both sit under the one `scoring` key.
type Scoring struct {
	ScoringRuntime `yaml:",inline"`
	ScoringEngine  `yaml:",inline"`
}

func defaultScoring() Scoring {
	return Scoring{ScoringRuntime: defaultScoringRuntime(), ScoringEngine: defaultScoringEngine()}
}

// ScoringEngine chooses the scorers and their backends (issue 5).
type ScoringEngine struct {
	Backend string `yaml:"backend"` // builtin | openai | anthropic
}

func defaultScoringEngine() ScoringEngine { return ScoringEngine{Backend: "builtin"} }
