// Package signals computes the online signals of every RAG record once and records them through
// one small Recorder interface to Prometheus, statsd and OTLP metrics.
package signals
