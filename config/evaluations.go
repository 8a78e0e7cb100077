package config

import "time"

// Evaluations configures where score results go besides ragwatch's own metrics and API: as
// OpenTelemetry GenAI `gen_ai.evaluation.result` events over OTLP, as Langfuse scores and as
// Phoenix span annotations (docs/evaluations-otlp.md, evaluations-langfuse.md,
// evaluations-phoenix.md). Each destination is off until its address is set. The process
// that scores a record exports its results (a sidecar's in-process workers, or a `ragwatch
// worker` pod), so each score leaves once however many sidecars share the NATS cluster.
type Evaluations struct {
	OTLP     EvaluationsOTLP     `yaml:"otlp"`
	Langfuse EvaluationsLangfuse `yaml:"langfuse"`
	Phoenix  EvaluationsPhoenix  `yaml:"phoenix"`

	// QueueSize bounds the evaluations waiting for each destination; beyond it they are
	// dropped and counted (ragwatch_evaluation_export_dropped_total{reason="queue_full"}).
	QueueSize int `yaml:"queue_size"`
	// MaxBatch is the most evaluations sent in one request.
	MaxBatch int `yaml:"max_batch"`
	// FlushInterval is how long an evaluation waits for a batch to fill.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// Timeout bounds one request.
	Timeout time.Duration `yaml:"timeout"`
	// RetryFor is how long a batch is retried (network errors, 429, 5xx) before it is
	// dropped and counted (reason="export_failed").
	RetryFor time.Duration `yaml:"retry_for"`
}

// EvaluationsOTLP sends `gen_ai.evaluation.result` events (OTLP logs); "" endpoint disables.
type EvaluationsOTLP struct {
	// Endpoint is host:port (gRPC, or HTTP with /v1/logs appended) or a URL.
	Endpoint SecretURL         `yaml:"endpoint"`
	Protocol string            `yaml:"protocol"` // grpc | http
	Insecure bool              `yaml:"insecure"`
	Headers  map[string]Secret `yaml:"headers"` // e.g. an API key; values never print
}

// RevealHeaders returns the headers to send with each export.
func (o EvaluationsOTLP) RevealHeaders() map[string]string {
	out := make(map[string]string, len(o.Headers))
	for k, v := range o.Headers {
		out[k] = v.Reveal()
	}
	return out
}

// EvaluationsLangfuse posts Langfuse scores (POST /api/public/scores with basic auth: the
// project's public key and secret key); "" url disables.
type EvaluationsLangfuse struct {
	URL           SecretURL `yaml:"url"` // e.g. https://cloud.langfuse.com
	PublicKeyEnv  string    `yaml:"public_key_env"`
	PublicKeyFile string    `yaml:"public_key_file"`
	SecretKeyEnv  string    `yaml:"secret_key_env"`
	SecretKeyFile string    `yaml:"secret_key_file"`
	// Environment is Langfuse's environment of the scores ("" leaves Langfuse's default).
	Environment string `yaml:"environment"`
}

// EvaluationsPhoenix posts Phoenix span annotations (POST /v1/span_annotations); "" url
// disables. The API key, when Phoenix requires one, is sent as a bearer token.
type EvaluationsPhoenix struct {
	URL        SecretURL `yaml:"url"` // e.g. http://phoenix:6006
	APIKeyEnv  string    `yaml:"api_key_env"`
	APIKeyFile string    `yaml:"api_key_file"`
}

func defaultEvaluations() Evaluations {
	return Evaluations{
		OTLP:          EvaluationsOTLP{Protocol: "grpc"},
		QueueSize:     4096,
		MaxBatch:      256,
		FlushInterval: time.Second,
		Timeout:       10 * time.Second,
		RetryFor:      time.Minute,
	}
}

// Enabled reports whether any destination is set.
func (e Evaluations) Enabled() bool {
	return e.OTLP.Endpoint != "" || e.Langfuse.URL != "" || e.Phoenix.URL != ""
}

// Validate implements Validator.
func (e Evaluations) Validate() error {
	var errs []error
	if e.QueueSize <= 0 || e.QueueSize > 1<<20 {
		errs = append(errs, Invalid("queue_size", "must be between 1 and 1048576, got %d", e.QueueSize))
	}
	if e.MaxBatch <= 0 || e.MaxBatch > 10000 {
		errs = append(errs, Invalid("max_batch", "must be between 1 and 10000, got %d", e.MaxBatch))
	}
	if e.FlushInterval <= 0 {
		errs = append(errs, Invalid("flush_interval", "must be positive"))
	}
	if e.Timeout <= 0 {
		errs = append(errs, Invalid("timeout", "must be positive"))
	}
	if e.RetryFor < 0 {
		errs = append(errs, Invalid("retry_for", "must not be negative"))
	}
	return joinErrs(errs)
}

// Validate implements Validator.
func (o EvaluationsOTLP) Validate() error {
	if o.Protocol != "grpc" && o.Protocol != "http" {
		return Invalid("protocol", "must be grpc or http, got %q", o.Protocol)
	}
	return nil
}

// Validate implements Validator.
func (l EvaluationsLangfuse) Validate() error {
	if l.URL == "" {
		return nil
	}
	var errs []error
	if err := checkURL(l.URL.Reveal()); err != nil {
		errs = append(errs, Invalid("url", "%v", err))
	}
	errs = append(errs, checkSecretSource("public_key", l.PublicKeyEnv, l.PublicKeyFile, true)...)
	errs = append(errs, checkSecretSource("secret_key", l.SecretKeyEnv, l.SecretKeyFile, true)...)
	return joinErrs(errs)
}

// Validate implements Validator.
func (p EvaluationsPhoenix) Validate() error {
	if p.URL == "" {
		return nil
	}
	var errs []error
	if err := checkURL(p.URL.Reveal()); err != nil {
		errs = append(errs, Invalid("url", "%v", err))
	}
	errs = append(errs, checkSecretSource("api_key", p.APIKeyEnv, p.APIKeyFile, false)...)
	return joinErrs(errs)
}

// checkSecretSource checks a secret given as <name>_env or <name>_file: not both, and one of
// them when required.
func checkSecretSource(name, env, file string, required bool) []error {
	switch {
	case env != "" && file != "":
		return []error{Invalid(name+"_env", "set either %s_env or %s_file, not both", name, name)}
	case required && env == "" && file == "":
		return []error{Invalid(name+"_env", "is required (or %s_file)", name)}
	}
	return nil
}
