package config

// Sampling configures which records are scored. Owned by the sampling work (issue 4).
type Sampling struct {
	Rate float64 `yaml:"rate"`
}

func defaultSampling() Sampling { return Sampling{Rate: 0.1} }

// ScoringRuntime is the part of `scoring` about the queue and the workers (issue 4).
type ScoringRuntime struct {
	Workers int `yaml:"workers"`
}

func defaultScoringRuntime() ScoringRuntime { return ScoringRuntime{Workers: 4} }
