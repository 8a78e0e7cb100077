package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/demo"
)

func init() {
	register("demo", "run ragwatch with a synthetic RAG app that breaks and recovers, and watch the alerts", runDemo)
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o demo.Options
	fs.Float64Var(&o.Rate, "rate", 20, "requests per second of the synthetic app")
	fs.DurationVar(&o.Duration, "duration", 0, "stop after this long and print a summary (0: until Ctrl-C)")
	fs.Uint64Var(&o.Seed, "seed", 1, "random seed of the synthetic traffic")
	fs.DurationVar(&o.DegradeAfter, "degrade-after", 20*time.Second, "when the synthetic index breaks")
	fs.DurationVar(&o.DegradeFor, "degrade-for", 25*time.Second, "how long it stays broken (0: for good)")
	fs.BoolVar(&o.Plain, "plain", false, "print log lines instead of redrawing the screen (for non-terminals)")
	fs.StringVar(&o.GRPCEndpoint, "otlp-grpc", "127.0.0.1:4317", "OTLP gRPC listen address")
	fs.StringVar(&o.HTTPOTLPEndpoint, "otlp-http", "127.0.0.1:4318", "OTLP HTTP listen address")
	fs.StringVar(&o.HTTPEndpoint, "http", "127.0.0.1:9464", "metrics and API listen address")
	fs.StringVar(&o.NATSEndpoint, "nats", "127.0.0.1:4222", "embedded NATS listen address")
	fs.StringVar(&o.DataDir, "data-dir", "", "store directory (default: a temporary directory removed at exit)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if _, err := demo.Run(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "ragwatch demo:", err)
		return 1
	}
	return 0
}
