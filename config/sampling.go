package config

// Sampling configures which records are scored. Owned by the sampling work (issue 4).
type Sampling struct {
	Rate float64 `yaml:"rate"`
}

func defaultSampling() Sampling { return Sampling{Rate: 0.1} }

// Scoring configures the scoring queue, workers and scorers (issues 4 and 5).
type Scoring struct {
	Workers int `yaml:"workers"`
}

func defaultScoring() Scoring { return Scoring{Workers: 4} }
