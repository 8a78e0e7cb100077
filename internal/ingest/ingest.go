// Package ingest holds the intake counters every receiver shares (OTLP gRPC and HTTP, NATS, the
// HTTP API), so that accepted spans and rejected input are counted the same way everywhere.
package ingest

import "github.com/prometheus/client_golang/prometheus"

// Receiver names used as the `receiver` label.
const (
	ReceiverOTLPGRPC = "otlp_grpc"
	ReceiverOTLPHTTP = "otlp_http"
	ReceiverNATS     = "nats"
	ReceiverAPI      = "api"
)

// Reject reasons used as the `reason` label. Keep the set small and known up front.
const (
	ReasonMalformed       = "malformed"       // undecodable protobuf or JSON
	ReasonInvalid         = "invalid"         // decodable but fails validation (bad ids, fields)
	ReasonContentType     = "content_type"    // unsupported media type
	ReasonTooLarge        = "too_large"       // body, message or batch over its limit
	ReasonLimits          = "limits"          // spans/attributes/value length over limits
	ReasonUnauthenticated = "unauthenticated" // missing or wrong credentials
	ReasonOverloaded      = "overloaded"      // memory limit or full buffer: retryable
	ReasonDuplicate       = "duplicate"       // already seen (at-least-once redelivery)
	// Score results read from NATS (receiver "nats").
	ReasonUnknownMetric = "unknown_metric" // a metric no scorer produces
	ReasonValueRange    = "value_range"    // a score outside [0, 1]
	ReasonWeightRange   = "weight_range"   // a weight the sampler cannot give (below 1, above 1/min rate)
)

// Metrics counts intake.
type Metrics struct {
	spans    *prometheus.CounterVec
	logs     *prometheus.CounterVec
	rejected *prometheus.CounterVec
}

// NewMetrics registers the intake counters.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		spans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_spans_received_total",
			Help: "Spans accepted by a receiver.",
		}, []string{"receiver"}),
		logs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_log_records_received_total",
			Help: "OTLP log records accepted by a receiver (what became of them: ragwatch_log_records_total).",
		}, []string{"receiver"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_ingest_rejected_total",
			Help: "Requests, messages or records rejected at intake, by receiver and reason.",
		}, []string{"receiver", "reason"}),
	}
	reg.MustRegister(m.spans, m.logs, m.rejected)
	return m
}

// Spans counts n accepted spans.
func (m *Metrics) Spans(receiver string, n int) {
	m.spans.WithLabelValues(receiver).Add(float64(n))
}

// LogRecords counts n accepted OTLP log records.
func (m *Metrics) LogRecords(receiver string, n int) {
	m.logs.WithLabelValues(receiver).Add(float64(n))
}

// Rejected counts one rejected input.
func (m *Metrics) Rejected(receiver, reason string) {
	m.rejected.WithLabelValues(receiver, reason).Inc()
}
