package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the whole of ragwatch's configuration. Each section lives in its own file.
type Config struct {
	Receivers Receivers  `yaml:"receivers"`
	HTTP      HTTPServer `yaml:"http"`
	Exporters Exporters  `yaml:"exporters"`
	Assembly  Assembly   `yaml:"assembly"`
	Signals   Signals    `yaml:"signals"`
	Log       Log        `yaml:"log"`

	NATS     NATS     `yaml:"nats"`
	Feedback Feedback `yaml:"feedback"`

	Variants     Variants     `yaml:"variants"`
	Conversation Conversation `yaml:"conversation"`
	// Conventions adjusts how traces are read (conventions.go).
	Conventions Conventions `yaml:"conventions"`
	Pairs       Pairs       `yaml:"pairs"`

	Sampling Sampling `yaml:"sampling"`
	Scoring  Scoring  `yaml:"scoring"`
	// Judges are user-defined G-Eval judges, scored as metrics judge_<name> (judges.go).
	Judges []Judge `yaml:"judges"`

	SLOs        []SLO        `yaml:"slos"`
	Comparisons []Comparison `yaml:"comparisons"`
	Drift       Drift        `yaml:"drift"`
	Notifiers   []Notifier   `yaml:"notifiers"`
	Alerting    Alerting     `yaml:"alerting"`

	Redaction Redaction `yaml:"redaction"`

	// Export keeps recent records for GET /api/v1/export (export.go).
	Export Export `yaml:"export"`
	// Evaluations sends score results to trace backends: OTLP events, Langfuse, Phoenix
	// (evaluations.go).
	Evaluations Evaluations `yaml:"evaluations"`
	// Golden is the judges' golden-set canary (golden.go).
	Golden Golden `yaml:"golden"`

	// Limits holds memory_limit_mib and the limits section (limits.go).
	Limits Limits `yaml:",inline"`
}

// String is the config as YAML with every credential redacted: Secret and SecretURL fields
// marshal hidden, so the text is safe for logs and the API.
func (c *Config) String() string {
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Sprintf("<config: %v>", err)
	}
	return string(b)
}

// Default returns the embedded defaults: what `ragwatch run` uses with no file.
func Default() *Config {
	return &Config{
		Receivers: Receivers{OTLP: OTLPReceivers{
			GRPC: Endpoint{Endpoint: "127.0.0.1:4317"},
			HTTP: Endpoint{Endpoint: "127.0.0.1:4318"},
		}},
		HTTP: HTTPServer{Endpoint: "0.0.0.0:9464", APIEndpoint: "127.0.0.1:9465"},
		Exporters: Exporters{
			Statsd: Statsd{Prefix: "rag", FlushInterval: 100 * time.Millisecond, FlushBytes: 1432, TagFormat: "datadog"},
			OTLP:   OTLPMetrics{Protocol: "grpc", Interval: 15 * time.Second, Timeout: 10 * time.Second},
		},
		Assembly: Assembly{
			Wait:         2 * time.Second,
			CompleteWait: 50 * time.Millisecond,
			Timeout:      60 * time.Second,
			MaxTraces:    50000,
			// MaxBytes 0: derived from the memory limit when the service starts.
		},
		Signals:  Signals{MaxServices: 50, ServiceTTL: time.Hour},
		Log:      Log{Level: "info", Format: "text"},
		NATS:     defaultNATS(),
		Feedback: defaultFeedback(),

		Variants:     defaultVariants(),
		Conversation: defaultConversation(),
		Pairs:        defaultPairs(),
		Sampling:     defaultSampling(),
		Scoring:      defaultScoring(),
		SLOs:         DefaultSLOs(),
		Drift:        defaultDrift(),
		Alerting:     defaultAlerting(),

		Redaction:   defaultRedaction(),
		Export:      defaultExport(),
		Evaluations: defaultEvaluations(),
		Golden:      defaultGolden(),
		Limits:      defaultLimits(),
	}
}

// Receivers configures where traces come in.
type Receivers struct {
	OTLP OTLPReceivers `yaml:"otlp"`
}

// OTLPReceivers configures the OTLP gRPC and HTTP receivers.
type OTLPReceivers struct {
	GRPC Endpoint `yaml:"grpc"`
	HTTP Endpoint `yaml:"http"`
	// MaxRequestBytes bounds one request body (HTTP, after decompression) or gRPC message.
	MaxRequestBytes int `yaml:"max_request_bytes"`
	// MaxConcurrentStreams bounds the gRPC exports in flight on one connection; 0 takes
	// otlp.DefaultMaxConcurrentStreams (100). gRPC's own default is unbounded.
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
	// UpstreamSamplingProbability declares that only this share of the traffic reaches ragwatch
	// (a Collector samples before it): the records of traces whose tracestate declares no
	// probability (ot=th) weigh 1/p in signal counts and score aggregates. 0: not sampled.
	UpstreamSamplingProbability float64 `yaml:"upstream_sampling_probability"`
}

// Endpoint is a listen address; "" disables the listener.
type Endpoint struct {
	Endpoint string `yaml:"endpoint"`
	// TLS serves TLS (mTLS with client_ca_file).
	TLS TLSServer `yaml:"tls"`
	// Auth requires a bearer token on every export.
	Auth BearerAuth `yaml:"auth"`
}

// Validate implements Validator.
func (e Endpoint) Validate() error {
	if e.Endpoint == "" {
		return nil
	}
	if err := checkHostPort(e.Endpoint); err != nil {
		return Invalid("endpoint", "%v", err)
	}
	return nil
}

// Validate implements Validator.
func (o OTLPReceivers) Validate() error {
	var errs []error
	if o.MaxRequestBytes < 0 {
		errs = append(errs, Invalid("max_request_bytes", "must not be negative"))
	}
	if o.MaxConcurrentStreams < 0 || o.MaxConcurrentStreams > 1<<20 {
		errs = append(errs, Invalid("max_concurrent_streams", "must be between 0 and 1048576"))
	}
	if p := o.UpstreamSamplingProbability; !(p >= 0 && p <= 1) {
		errs = append(errs, Invalid("upstream_sampling_probability", "must be between 0 (not sampled upstream) and 1, got %v", p))
	}
	return joinErrs(errs)
}

// HTTPServer is ragwatch's own HTTP server: /metrics, /healthz and /readyz on Endpoint, the
// API (/api/v1/..., /debug/pprof/...) on APIEndpoint.
type HTTPServer struct {
	Endpoint string `yaml:"endpoint"`
	// APIEndpoint is the API's listener, 127.0.0.1:9465 by default, so that opening Endpoint
	// to Prometheus and the kubelet does not open the API; "" serves the API on Endpoint.
	APIEndpoint string `yaml:"api_endpoint"`
	// TLS serves TLS (mTLS with client_ca_file) on both listeners.
	TLS TLSServer `yaml:"tls"`
	// Auth requires a bearer token on /api/v1/* and /debug/*, reads and writes alike (answers
	// may carry content). Without it the API answers only requests from 127.0.0.1 or ::1
	// addressed to localhost. /metrics, /healthz and /readyz stay open for probes and scrapers.
	Auth BearerAuth `yaml:"auth"`
}

// Validate implements Validator.
func (h HTTPServer) Validate() error {
	var errs []error
	if err := checkHostPort(h.Endpoint); err != nil {
		errs = append(errs, Invalid("endpoint", "%v", err))
	}
	if h.APIEndpoint != "" {
		if err := checkHostPort(h.APIEndpoint); err != nil {
			errs = append(errs, Invalid("api_endpoint", "%v", err))
		} else if h.APIEndpoint == h.Endpoint && !strings.HasSuffix(h.Endpoint, ":0") { // :0 is two free ports
			errs = append(errs, Invalid("api_endpoint", "must differ from `endpoint`; leave it empty to serve the API on `endpoint`"))
		}
	}
	return joinErrs(errs)
}

// Exporters configures where online signals go besides /metrics.
type Exporters struct {
	Statsd Statsd      `yaml:"statsd"`
	OTLP   OTLPMetrics `yaml:"otlp"`
}

// Statsd pushes signals over UDP; "" endpoint disables.
type Statsd struct {
	Endpoint      string        `yaml:"endpoint"`
	Prefix        string        `yaml:"prefix"`
	FlushInterval time.Duration `yaml:"flush_interval"`
	FlushBytes    int           `yaml:"flush_bytes"`
	// TagFormat says how the service tag is written: datadog (`|#service:x`, also read by
	// statsd_exporter and Telegraf), influx (`name,service=x:...`), graphite (`name;service=x:...`)
	// or none (plain statsd lines, no tags).
	TagFormat string `yaml:"tag_format"`
}

// Validate implements Validator.
func (s Statsd) Validate() error {
	if s.Endpoint == "" {
		return nil
	}
	var errs []error
	if err := checkHostPort(s.Endpoint); err != nil {
		errs = append(errs, Invalid("endpoint", "%v", err))
	}
	if s.FlushInterval <= 0 {
		errs = append(errs, Invalid("flush_interval", "must be positive"))
	}
	if s.FlushBytes < 0 || s.FlushBytes > 65000 {
		errs = append(errs, Invalid("flush_bytes", "must be between 0 and 65000"))
	}
	switch s.TagFormat {
	case "datadog", "influx", "graphite", "none":
	default:
		errs = append(errs, Invalid("tag_format", "must be datadog, influx, graphite or none, got %q", s.TagFormat))
	}
	return joinErrs(errs)
}

// OTLPMetrics pushes the same signals as OTLP metrics; "" endpoint disables.
type OTLPMetrics struct {
	// Endpoint is host:port or a URL, which may carry user info or a key in its query.
	Endpoint SecretURL         `yaml:"endpoint"`
	Protocol string            `yaml:"protocol"` // grpc | http
	Insecure bool              `yaml:"insecure"`
	Interval time.Duration     `yaml:"interval"`
	Timeout  time.Duration     `yaml:"timeout"`
	Headers  map[string]Secret `yaml:"headers"` // e.g. an API key; values never print
}

// RevealHeaders returns the headers to send with each export.
func (o OTLPMetrics) RevealHeaders() map[string]string {
	out := make(map[string]string, len(o.Headers))
	for k, v := range o.Headers {
		out[k] = v.Reveal()
	}
	return out
}

// Validate implements Validator.
func (o OTLPMetrics) Validate() error {
	var errs []error
	if o.Protocol != "grpc" && o.Protocol != "http" {
		errs = append(errs, Invalid("protocol", "must be grpc or http, got %q", o.Protocol))
	}
	if o.Endpoint != "" {
		if o.Interval <= 0 {
			errs = append(errs, Invalid("interval", "must be positive"))
		}
		if o.Timeout <= 0 {
			errs = append(errs, Invalid("timeout", "must be positive"))
		}
	}
	return joinErrs(errs)
}

// Assembly configures how spans of one trace are grouped into records.
type Assembly struct {
	// Wait is how long a trace is held after a local root span arrived, for stragglers.
	Wait time.Duration `yaml:"wait"`
	// CompleteWait replaces Wait for a trace that is visibly complete when its true root (no
	// parent) arrives: it holds a retrieval and a generation and every held span's parent is
	// held. Only stragglers of reordered exports are expected then (milliseconds), and at
	// 20,000 traces/s each of its milliseconds costs ≈ 0.5 MiB of resident memory
	// (docs/performance-history.md): 50ms by default. Equal to Wait: no early release.
	CompleteWait time.Duration `yaml:"complete_wait"`
	Timeout      time.Duration `yaml:"timeout"`
	MaxTraces    int           `yaml:"max_traces"`
	// MaxBytes bounds the heap the held traces keep alive. 0 (the default) derives it when the
	// service starts: a quarter of the memory limit (memory_limit_mib, else 90% of GOMEMLIMIT,
	// which the cgroup sets when the environment does not), at most DefaultAssemblyMaxBytes;
	// DefaultAssemblyMaxBytes with no limit. Held traces take ≈ 2.2 × max_bytes of resident
	// memory under a flood, so a fixed 256 MiB would exceed a 128 MiB container by itself.
	MaxBytes int64 `yaml:"max_bytes"`
}

// DefaultAssemblyMaxBytes is assembly.max_bytes with no memory limit, and its largest derived
// value.
const DefaultAssemblyMaxBytes = 256 << 20

// Validate implements Validator.
func (a Assembly) Validate() error {
	var errs []error
	if a.Wait < 0 {
		errs = append(errs, Invalid("wait", "must not be negative"))
	}
	if a.CompleteWait < 0 {
		errs = append(errs, Invalid("complete_wait", "must not be negative"))
	} else if a.Wait >= 0 && a.CompleteWait > a.Wait {
		errs = append(errs, Invalid("complete_wait", "must not be larger than `wait` (%s)", a.Wait))
	}
	if a.Timeout <= 0 {
		errs = append(errs, Invalid("timeout", "must be positive"))
	} else if a.Timeout < a.Wait {
		errs = append(errs, Invalid("timeout", "must be at least `wait` (%s)", a.Wait))
	}
	if a.MaxTraces <= 0 {
		errs = append(errs, Invalid("max_traces", "must be positive"))
	}
	if a.MaxBytes < 0 {
		errs = append(errs, Invalid("max_bytes", "must not be negative (0 derives it from the memory limit)"))
	}
	return joinErrs(errs)
}

// followWait lowers a complete_wait left at its default to a file's lower wait: a file written
// before complete_wait existed, with `wait: 30ms`, keeps validating and means what it said (no
// trace waits longer than 30ms). A complete_wait the file sets is checked as written. set says
// which key paths the file holds.
func (a *Assembly) followWait(set func(key string) bool) {
	if set("assembly.wait") && !set("assembly.complete_wait") && a.Wait >= 0 && a.CompleteWait > a.Wait {
		a.CompleteWait = a.Wait
	}
}

// Signals configures the online signals.
type Signals struct {
	// MaxServices caps distinct `service` label values; further services are labelled "other".
	MaxServices int `yaml:"max_services"`
	// ServiceTTL frees the label of a service not seen for that long when a new service needs
	// a slot, and deletes its series: names sent once (junk, typos, a scan) cannot hold the cap
	// forever. 0 keeps every admitted name for the life of the process.
	ServiceTTL time.Duration `yaml:"service_ttl"`
}

// Validate implements Validator.
func (s Signals) Validate() error {
	if s.MaxServices <= 0 {
		return Invalid("max_services", "must be positive")
	}
	if s.ServiceTTL < 0 {
		return Invalid("service_ttl", "must not be negative (0 keeps names forever)")
	}
	return nil
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // text | json
}

// Validate implements Validator.
func (l Log) Validate() error {
	var errs []error
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, Invalid("level", "must be debug, info, warn or error, got %q", l.Level))
	}
	if l.Format != "text" && l.Format != "json" {
		errs = append(errs, Invalid("format", "must be text or json, got %q", l.Format))
	}
	return joinErrs(errs)
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("must be host:port, got %q", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 || strconv.Itoa(n) != port {
		return fmt.Errorf("must be host:port with a port in 0-65535, got %q", s)
	}
	if host != "" && net.ParseIP(host) == nil && !validHostname(host) {
		return fmt.Errorf("must be host:port with an IP address or host name, got host %q", host)
	}
	return nil
}

// validHostname accepts RFC 1123 host names: dot-separated labels of letters, digits and
// inner hyphens, each at most 63 characters, 253 in all.
func validHostname(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func joinErrs(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return joinSorted(errs)
}
