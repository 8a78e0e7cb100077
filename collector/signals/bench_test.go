package signals

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
)

// benchRecord is a typical record: 5 documents of 1 KB with scores, an answer of ~60 words,
// usage, three latency stages, inline feedback.
func benchRecord() *record.Record {
	r := &record.Record{
		TraceID: traceA, SpanID: spanA, Service: "support-bot",
		Query:    "How do I reset my password?",
		Answer:   strings.Repeat("word ", 60) + "[1][2]",
		Usage:    record.Usage{InputTokens: 1800, OutputTokens: 85},
		Latency:  record.Latency{Retrieval: 35.5, Generation: 812, Total: 870.25},
		Feedback: &record.Feedback{Score: 1},
	}
	for i := range 5 {
		r.Documents = append(r.Documents, record.Document{
			ID: fmt.Sprintf("d%d", i), Score: score(0.9 - float64(i)/10), Content: strings.Repeat("x", 1024),
		})
	}
	r.Citations = []record.Citation{{Text: "a", DocumentIDs: []string{"d0"}}, {Text: "b", DocumentIDs: []string{"d1"}}}
	return r
}

// BenchmarkConsumeRecord measures recording one typical record. The push exporters go to a
// real UDP socket that nobody reads (the kernel drops what overflows) and to an OTLP endpoint
// nobody serves with a long interval, so what is measured is recording, not exporting.
func BenchmarkConsumeRecord(b *testing.B) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	statsdCfg := config.Statsd{Endpoint: conn.LocalAddr().String(), Prefix: "rag", TagFormat: "datadog",
		FlushInterval: 100 * time.Millisecond, FlushBytes: 1432}
	otlpCfg := config.OTLPMetrics{Endpoint: "127.0.0.1:1", Protocol: "grpc", Insecure: true,
		Interval: time.Hour, Timeout: 100 * time.Millisecond}
	for _, bb := range []struct {
		name string
		exp  config.Exporters
	}{
		{"prometheus", config.Exporters{}},
		{"prometheus/exemplar-every-record", config.Exporters{}},
		{"prometheus+statsd", config.Exporters{Statsd: statsdCfg}},
		{"prometheus+otlp", config.Exporters{OTLP: otlpCfg}},
		{"prometheus+statsd+otlp", config.Exporters{Statsd: statsdCfg, OTLP: otlpCfg}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			s, _ := newTestSignalsTB(b, 50, bb.exp)
			if strings.HasSuffix(bb.name, "exemplar-every-record") {
				// A clock a second ahead on every read: every gate opens and every record builds
				// its six exemplars (three stages, two scores, feedback): the worst case, which
				// the gate prevents in steady state.
				t := time.Unix(0, 0)
				s.set.Now = func() time.Time { t = t.Add(ExemplarInterval); return t }
			}
			if err := s.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			benchConsume(b, s)
			b.StopTimer()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_ = s.Shutdown(ctx) // the OTLP endpoint does not exist: the final export fails
		})
	}
}

// benchConsume also reports cpu-ns/op: the process's CPU time (all threads, including GC and
// the statsd flush goroutine) per record, which stays meaningful on a loaded machine where
// ns/op (wall time) includes waiting for a CPU.
func benchConsume(b *testing.B, s *Signals) {
	r := benchRecord()
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := benchcpu.Now()
	n := 0
	for b.Loop() {
		if err := s.ConsumeRecord(ctx, r); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(benchcpu.Now()-cpu0)/float64(n), "cpu-ns/op")
}
