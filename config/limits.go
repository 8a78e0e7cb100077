package config

// Limits bounds what ragwatch takes from outside and how much memory it may use. Its keys sit
// at the top level of the config file: `memory_limit_mib` and the `limits` section.
type Limits struct {
	// MemoryLimitMiB is the live heap above which intake is refused with retryable errors
	// (OTLP gRPC RESOURCE_EXHAUSTED, HTTP 503 with Retry-After, NATS nak with delay) until
	// the heap falls below 90% of it. 0 takes 90% of GOMEMLIMIT when that is set, else no
	// limit.
	MemoryLimitMiB int `yaml:"memory_limit_mib"`
	// Intake bounds single requests and messages.
	Intake IntakeLimits `yaml:"limits"`
}

// IntakeLimits bounds one request or message from outside. A zero field takes its default.
type IntakeLimits struct {
	// MaxJSONDepth bounds the nesting of record and feedback JSON (API and NATS) and of
	// OTLP/JSON bodies. Default 64.
	MaxJSONDepth int `yaml:"max_json_depth"`
	// MaxRecordsPerBatch bounds the records of one JSON array (API and NATS). Default 1000.
	MaxRecordsPerBatch int `yaml:"max_records_per_batch"`
	// MaxAPIBodyBytes bounds one POST /api/v1/records body. Default 8 MiB.
	MaxAPIBodyBytes int64 `yaml:"max_api_body_bytes"`
	// MaxSpansPerRequest bounds the spans of one OTLP request. Default 10000.
	MaxSpansPerRequest int `yaml:"max_spans_per_request"`
	// MaxAttributesPerSpan bounds the attributes of one span, event, link or resource.
	// Default 2048.
	MaxAttributesPerSpan int `yaml:"max_attributes_per_span"`
	// MaxAttributeValueBytes bounds one attribute value (and span name). Default 1 MiB.
	MaxAttributeValueBytes int `yaml:"max_attribute_value_bytes"`
}

// Defaults of IntakeLimits.
const (
	DefaultMaxJSONDepth       = 64
	DefaultMaxRecordsPerBatch = 1000
)

func defaultLimits() Limits {
	return Limits{Intake: IntakeLimits{MaxJSONDepth: DefaultMaxJSONDepth, MaxRecordsPerBatch: DefaultMaxRecordsPerBatch}}
}

// Validate implements Validator.
func (l Limits) Validate() error {
	if l.MemoryLimitMiB < 0 {
		return Invalid("memory_limit_mib", "must not be negative (0 follows GOMEMLIMIT)")
	}
	return nil
}

// Validate implements Validator.
func (l IntakeLimits) Validate() error {
	var errs []error
	for _, f := range []struct {
		key string
		v   int64
	}{
		{"max_json_depth", int64(l.MaxJSONDepth)},
		{"max_records_per_batch", int64(l.MaxRecordsPerBatch)},
		{"max_api_body_bytes", l.MaxAPIBodyBytes},
		{"max_spans_per_request", int64(l.MaxSpansPerRequest)},
		{"max_attributes_per_span", int64(l.MaxAttributesPerSpan)},
		{"max_attribute_value_bytes", int64(l.MaxAttributeValueBytes)},
	} {
		if f.v < 0 {
			errs = append(errs, Invalid(f.key, "must not be negative (0 takes the default)"))
		}
	}
	return joinErrs(errs)
}
