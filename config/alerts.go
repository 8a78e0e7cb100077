package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Alerting holds engine-wide alert settings.
type Alerting struct {
	EvaluationInterval time.Duration `yaml:"evaluation_interval"`
	// ResolvedRetention is how long /api/v1/alerts lists a resolved alert.
	ResolvedRetention model.Duration `yaml:"resolved_retention"`
	// TraceURLTemplate links evidence to a trace viewer; {trace_id} and {service} are replaced
	// (query-escaped), e.g. http://grafana:3000/explore?...{trace_id}...
	TraceURLTemplate SecretURL `yaml:"trace_url_template"`
	// DashboardURL is the default `dashboard_url` annotation.
	DashboardURL SecretURL `yaml:"dashboard_url"`
	// StateBucket is the JetStream KV bucket holding window state across restarts; "" keeps
	// state in memory only.
	StateBucket  string        `yaml:"state_bucket"`
	SaveInterval time.Duration `yaml:"save_interval"`
	// StateMaxBytes caps the state bucket (one small key per SLO and detector).
	StateMaxBytes int64 `yaml:"state_max_bytes"`
	// Agreement measures judges against human labels (config/agreement.go).
	Agreement Agreement `yaml:"agreement"`
	// Diagnosis reads the metric pairs to say why an alert fires.
	Diagnosis Diagnosis `yaml:"diagnosis"`
}

func defaultAlerting() Alerting {
	return Alerting{
		EvaluationInterval: 15 * time.Second,
		ResolvedRetention:  model.Duration(24 * time.Hour),
		StateBucket:        "ragwatch_alerts",
		SaveInterval:       30 * time.Second,
		StateMaxBytes:      8 << 20,
		Agreement:          defaultAgreement(),
		Diagnosis:          defaultDiagnosis(),
	}
}

var bucketRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Validate implements Validator.
func (a Alerting) Validate() error {
	var errs []error
	if a.EvaluationInterval < time.Second {
		errs = append(errs, Invalid("evaluation_interval", "must be at least 1s"))
	}
	if a.ResolvedRetention < 0 {
		errs = append(errs, Invalid("resolved_retention", "must not be negative"))
	}
	if a.TraceURLTemplate != "" && !strings.Contains(a.TraceURLTemplate.Reveal(), "{trace_id}") {
		errs = append(errs, Invalid("trace_url_template", "must contain {trace_id}"))
	}
	errs = append(errs, checkAlertURL("dashboard_url", a.DashboardURL)...)
	if a.StateBucket != "" && !bucketRE.MatchString(a.StateBucket) {
		errs = append(errs, Invalid("state_bucket", "must be letters, digits, '_' or '-', got %q", a.StateBucket))
	}
	if a.SaveInterval <= 0 {
		errs = append(errs, Invalid("save_interval", "must be positive"))
	}
	if a.StateBucket != "" && a.StateMaxBytes <= 0 {
		errs = append(errs, Invalid("state_max_bytes", "must be positive"))
	}
	return joinErrs(errs)
}

// CheckAlertRefs checks what no single section can: SLO and detector names are unique and
// every `notifiers:` entry names a configured notifier. Load and Parse run it; the alert
// engine's Update runs it again on a reload (its config source is an option of the service).
func CheckAlertRefs(c *Config) error {
	var errs []error
	names := map[string]bool{}
	for i, n := range c.Notifiers {
		if names[n.Name] {
			errs = append(errs, Invalid(fmt.Sprintf("notifiers[%d].name", i), "%q is used twice", n.Name))
		}
		names[n.Name] = true
	}
	check := func(prefix string, refs []string) {
		for j, r := range refs {
			if !names[r] {
				errs = append(errs, Invalid(fmt.Sprintf("%s.notifiers[%d]", prefix, j), "names no configured notifier: %q", r))
			}
		}
	}
	slos := map[string]bool{}
	for i, s := range c.SLOs {
		if slos[s.Name] {
			errs = append(errs, Invalid(fmt.Sprintf("slos[%d].name", i), "%q is used twice", s.Name))
		}
		slos[s.Name] = true
		check(fmt.Sprintf("slos[%d]", i), s.Notifiers)
	}
	for i, d := range c.Drift.Detectors {
		check(fmt.Sprintf("drift.detectors[%d]", i), d.Notifiers)
	}
	errs = append(errs, checkComparisons(c, check)...)
	return joinErrs(errs)
}

// Shared by the alert sections (slos.go, drift.go, notifiers.go): names, labels, URLs, YAML keys.

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

var reservedLabels = map[string]bool{"alertname": true, "slo": true, "service": true, "severity": true, "detector": true}

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func validSeverity(s string) bool { return s == "page" || s == "ticket" || s == "info" }

func checkLabels(l map[string]string) []error {
	var errs []error
	for k := range l {
		if reservedLabels[k] {
			errs = append(errs, Invalid("labels."+k, "is set by ragwatch and cannot be overridden"))
		} else if !labelNameRE.MatchString(k) {
			errs = append(errs, Invalid("labels."+k, "is not a valid Prometheus label name"))
		}
	}
	return errs
}

func checkAlertURL(key string, u SecretURL) []error {
	s := u.Reveal()
	if s == "" {
		return nil
	}
	if u, err := url.Parse(s); err != nil || u.Scheme == "" || u.Host == "" {
		return []error{Invalid(key, "must be an absolute URL")}
	}
	return nil
}

func mappingKeys(n *yaml.Node) map[string]bool {
	out := map[string]bool{}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			out[n.Content[i].Value] = true
		}
	}
	return out
}
