package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/loadgen"
)

func init() {
	register("loadgen", "send synthetic RAG traces to an OTLP endpoint or NATS and report the achieved rate", runLoadgen)
}

func runLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o loadgen.Options
	fs.StringVar(&o.Protocol, "protocol", "grpc", "grpc, http (OTLP/HTTP protobuf), http-json (OTLP/HTTP JSON) or nats")
	fs.StringVar(&o.Endpoint, "endpoint", "127.0.0.1:4317", "OTLP gRPC host:port, OTLP HTTP URL or host:port, or NATS URL (the embedded server: nats://app:<password>@127.0.0.1:4222)")
	fs.StringVar(&o.Subject, "subject", "ragwatch.otlp.traces", "NATS subject for OTLP protobuf (protocol nats)")
	fs.StringVar(&o.LogsSubject, "logs-subject", "ragwatch.otlp.logs", "NATS subject for OTLP protobuf logs (protocol nats, --logs)")
	fs.BoolVar(&o.Logs, "logs", false, "also send each trace's GenAI log events (system message, user message, choice of its LLM span, as the OpenTelemetry OpenAI instrumentation emits them) to the logs service, path or subject, before its traces")
	fs.Float64Var(&o.Rate, "rate", 100, "traces per second; 0 sends as fast as possible")
	fs.DurationVar(&o.Duration, "duration", 0, "how long to send (e.g. 30s)")
	fs.IntVar(&o.Count, "count", 0, "stop after this many traces")
	fs.IntVar(&o.Batch, "batch", 1, "traces per request")
	fs.IntVar(&o.Concurrency, "concurrency", 4, "requests in flight")
	fs.IntVar(&o.Synth.Spans, "spans", 5, "spans per trace (at least 3)")
	fs.IntVar(&o.Synth.Documents, "documents", 5, "documents per retrieval (at most 11)")
	fs.IntVar(&o.Synth.DocBytes, "doc-bytes", 1024, "bytes of content per document")
	fs.Uint64Var(&o.Synth.Seed, "seed", 1, "random seed")
	fs.StringVar(&o.Synth.Service, "service", "support-bot", "service.name of the traces")
	fs.BoolVar(&o.Synth.NoRoot, "no-root", false, "leave out each trace's root span, so no trace ever completes (memory soak)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.Duration == 0 && o.Count == 0 {
		fmt.Fprintln(stderr, "loadgen: set --duration or --count")
		return 2
	}
	res, err := loadgen.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	fmt.Fprintln(stdout, res)
	if res.Errors > 0 {
		return 1
	}
	return 0
}
