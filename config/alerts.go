package config

// SLO is one service-level objective on a signal or eval metric (issue 6).
type SLO struct {
	Name string `yaml:"name"`
}

// Drift configures drift detectors (issue 6).
type Drift struct{}

func defaultDrift() Drift { return Drift{} }

// Notifier is one alert delivery target (issue 6).
type Notifier struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"`
}

// Alerting holds engine-wide alert settings (issue 6).
type Alerting struct{}

func defaultAlerting() Alerting { return Alerting{} }
