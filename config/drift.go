package config

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Drift methods.
const (
	DriftPSI = "psi"
	DriftKS  = "ks"
	DriftJS  = "js"
)

// Drift configures the drift detectors: each compares a signal's distribution over the current
// Window with a reference, either the trailing ReferenceWindow before it or a pinned baseline
// written by `ragwatch baseline` (BaselineFile).
type Drift struct {
	Window          model.Duration  `yaml:"window"`
	ReferenceWindow model.Duration  `yaml:"reference_window"`
	BaselineFile    string          `yaml:"baseline_file"` // set: the reference is this snapshot
	Detectors       []DriftDetector `yaml:"detectors"`
}

// DriftDetector compares one signal's distribution with its reference by one method.
type DriftDetector struct {
	Name    string `yaml:"name"`
	Signal  string `yaml:"signal"`
	Service string `yaml:"service"`
	// Variant keeps only the records and scores of this variant; "" = all.
	Variant             string            `yaml:"variant"`
	Method              string            `yaml:"method"`    // psi | ks | js
	Threshold           float64           `yaml:"threshold"` // alert above
	Buckets             []float64         `yaml:"buckets"`   // bin edges; default per signal
	MinSamples          int               `yaml:"min_samples"`
	MinReferenceSamples int               `yaml:"min_reference_samples"`
	For                 model.Duration    `yaml:"for"`
	KeepFiringFor       model.Duration    `yaml:"keep_firing_for"`
	Severity            string            `yaml:"severity"`
	Labels              map[string]string `yaml:"labels"`
	RunbookURL          SecretURL         `yaml:"runbook_url"`
	DashboardURL        SecretURL         `yaml:"dashboard_url"`
	Notifiers           []string          `yaml:"notifiers"`
}

// DefaultDriftThreshold is the alert level of each method: PSI 0.2 is the usual "significant
// shift"; KS is the largest CDF gap; JS is in bits (0..1).
func DefaultDriftThreshold(method string) float64 {
	switch method {
	case DriftKS:
		return 0.1
	case DriftJS:
		return 0.1
	}
	return 0.2
}

func defaultDetector(name, signal string) DriftDetector {
	return DriftDetector{
		Name: name, Signal: signal, Method: DriftPSI, Threshold: 0.2,
		MinSamples: 100, MinReferenceSamples: 200,
		For: model.Duration(5 * time.Minute), KeepFiringFor: model.Duration(5 * time.Minute),
		Severity: "ticket",
	}
}

func defaultDrift() Drift {
	return Drift{
		Window:          model.Duration(time.Hour),
		ReferenceWindow: model.Duration(24 * time.Hour),
		Detectors: []DriftDetector{
			defaultDetector("retrieval-score-psi", "retrieval_score_top"),
			defaultDetector("retrieved-documents-psi", "retrieved_documents"),
			defaultDetector("answer-tokens-psi", "answer_tokens"),
		},
	}
}

// UnmarshalYAML fills defaults before decoding.
func (d *DriftDetector) UnmarshalYAML(n *yaml.Node) error {
	type plain DriftDetector
	p := plain(defaultDetector("", ""))
	if err := n.Decode(&p); err != nil {
		return err
	}
	has := mappingKeys(n)
	if !has["threshold"] {
		p.Threshold = DefaultDriftThreshold(p.Method)
	}
	if !has["keep_firing_for"] && has["for"] {
		p.KeepFiringFor = max(p.For, model.Duration(time.Minute))
	}
	*d = DriftDetector(p)
	return nil
}

// Validate implements Validator.
func (d Drift) Validate() error {
	var errs []error
	if d.Window <= 0 {
		errs = append(errs, Invalid("window", "must be positive"))
	}
	if d.ReferenceWindow < d.Window {
		errs = append(errs, Invalid("reference_window", "must be at least `window` (%s)", d.Window))
	}
	seen := map[string]bool{}
	for i, det := range d.Detectors {
		if seen[det.Name] {
			errs = append(errs, Invalid(fmt.Sprintf("detectors[%d].name", i), "%q is used twice", det.Name))
		}
		seen[det.Name] = true
	}
	return joinErrs(errs)
}

// Validate implements Validator.
func (d DriftDetector) Validate() error {
	var errs []error
	if !nameRE.MatchString(d.Name) {
		errs = append(errs, Invalid("name", "must be 1-64 letters, digits, '_', '.' or '-', got %q", d.Name))
	}
	if d.Signal == "" {
		errs = append(errs, Invalid("signal", "is required"))
	}
	switch d.Method {
	case DriftPSI, DriftKS, DriftJS:
	default:
		errs = append(errs, Invalid("method", "must be psi, ks or js, got %q", d.Method))
	}
	if !(d.Threshold > 0) {
		errs = append(errs, Invalid("threshold", "must be positive"))
	}
	for i := 1; i < len(d.Buckets); i++ {
		if !(d.Buckets[i] > d.Buckets[i-1]) {
			errs = append(errs, Invalid("buckets", "must be strictly increasing"))
			break
		}
	}
	if len(d.Buckets) > 200 {
		errs = append(errs, Invalid("buckets", "must have at most 200 edges"))
	}
	if d.MinSamples < 1 {
		errs = append(errs, Invalid("min_samples", "must be at least 1"))
	}
	if d.MinReferenceSamples < 1 {
		errs = append(errs, Invalid("min_reference_samples", "must be at least 1"))
	}
	if d.For < 0 || d.KeepFiringFor < 0 {
		errs = append(errs, Invalid("for", "`for` and `keep_firing_for` must not be negative"))
	}
	if !validSeverity(d.Severity) {
		errs = append(errs, Invalid("severity", "must be page, ticket or info, got %q", d.Severity))
	}
	errs = append(errs, checkLabels(d.Labels)...)
	errs = append(errs, checkAlertURL("runbook_url", d.RunbookURL)...)
	errs = append(errs, checkAlertURL("dashboard_url", d.DashboardURL)...)
	return joinErrs(errs)
}
