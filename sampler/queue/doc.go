// Package queue is the durable scoring queue: a JetStream work-queue stream that sampled
// records are published to (never blocking ingestion), the durable pull consumer workers take
// them from, the dead-letter stream for records that keep failing, and the
// ragwatch.scores.<service> subjects that carry results to the alert engine.
package queue
