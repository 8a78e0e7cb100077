package queue

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/promreg"
)

// Drop reasons of ragwatch_scoring_dropped_total.
const (
	DropQueueFull       = "queue_full"       // the in-memory buffer is full
	DropStorageFull     = "storage_full"     // JetStream refused the record for lack of storage
	DropNATSUnavailable = "nats_unavailable" // not connected, or the publish was not acknowledged
	DropTooLarge        = "too_large"        // the record is larger than the server's max payload
)

// Metrics are the queue metrics shared by the publisher and the workers of one process. Create
// them with NewMetrics; creating them twice on one registry returns the same collectors.
type Metrics struct {
	Dropped       *prometheus.CounterVec
	DeadLetter    prometheus.Counter
	Depth         prometheus.Gauge
	InvalidScores prometheus.Counter
	// StorageFull is 1 while JetStream refuses sampled records for lack of storage.
	StorageFull prometheus.Gauge
	// MessageRecords observes the records of each message the publisher sends: 1, or a batch's.
	MessageRecords prometheus.Histogram
}

// NewMetrics registers (or finds) the queue metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // unexported metrics, for callers that do not scrape
	}
	m := &Metrics{
		Dropped: promreg.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_scoring_dropped_total",
			Help: "Sampled records dropped before reaching the scoring queue, by reason: queue_full, storage_full, nats_unavailable, too_large.",
		}, []string{"reason"})),
		DeadLetter: promreg.MustRegister(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ragwatch_scoring_dead_letter_total",
			Help: "Records moved to the dead-letter subject after failing max_deliver times.",
		})),
		Depth: promreg.MustRegister(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ragwatch_scoring_queue_depth",
			Help: "Messages in the scoring stream (waiting or being scored), as last polled: a record each, or a batch of up to scoring.queue.batch_records.",
		})),
		InvalidScores: promreg.MustRegister(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ragwatch_scores_invalid_total",
			Help: "Score results on the scores subjects rejected by the checks, and messages there that were not a result or an array of at most 256 results (each counted once).",
		})),
		StorageFull: promreg.MustRegister(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ragwatch_scoring_queue_storage_full",
			Help: "1 while JetStream refuses sampled records for lack of storage (the scoring stream at scoring.queue.max_bytes, or the server's store full), 0 once a record is accepted again.",
		})),
		MessageRecords: promreg.MustRegister(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ragwatch_scoring_queue_message_records",
			Help:    "Sampled records in each message published to the scoring stream: 1, or a batch's (scoring.queue.batch_records).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000},
		})),
	}
	for _, r := range []string{DropQueueFull, DropStorageFull, DropNATSUnavailable, DropTooLarge} {
		m.Dropped.WithLabelValues(r)
	}
	return m
}
