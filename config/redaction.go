package config

import (
	"regexp"
	"strconv"
)

// Redaction configures the removal of personal data from text before it leaves the process
// (judge prompts, score messages, API output, alert annotations).
type Redaction struct {
	// Enabled turns redaction on for every outbound path. Default true.
	Enabled bool `yaml:"enabled"`
	// Detectors lists the built-in detectors: secret, email, card, iban, ip, phone. Empty = all.
	Detectors []string `yaml:"detectors"`
	// Patterns are custom detectors.
	Patterns []RedactionPattern `yaml:"patterns"`
}

// RedactionPattern is a named regular expression.
type RedactionPattern struct {
	Name  string `yaml:"name"`
	Regex string `yaml:"regex"`
}

func defaultRedaction() Redaction { return Redaction{Enabled: true} }

// Validate implements Validator.
func (r Redaction) Validate() error {
	var errs []error
	for i, d := range r.Detectors {
		switch d {
		case "secret", "email", "card", "iban", "ip", "phone":
		default:
			errs = append(errs, Invalid("detectors["+strconv.Itoa(i)+"]", "must be one of secret, email, card, iban, ip, phone, got %q", d))
		}
	}
	return joinErrs(errs)
}

// Validate implements Validator.
func (p RedactionPattern) Validate() error {
	var errs []error
	if p.Name == "" {
		errs = append(errs, Invalid("name", "is required"))
	}
	if _, err := regexp.Compile(p.Regex); err != nil {
		errs = append(errs, Invalid("regex", "is not a valid regular expression: %v", err))
	}
	return joinErrs(errs)
}
