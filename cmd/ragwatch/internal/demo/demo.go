// Package demo runs ragwatch on its embedded defaults next to a synthetic RAG application that
// sends real OTLP traces through the OpenTelemetry SDK, breaks its index for a while and
// recovers, so a drift alert and a citation-precision alert fire and resolve in front of you.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"

	"github.com/ragwatch/ragwatch/alerts/comparison"
	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/internal/synth"
)

// Options configure a demo run.
type Options struct {
	Rate         float64       // requests per second
	Duration     time.Duration // 0 runs until ctx ends
	Seed         uint64
	DegradeAfter time.Duration // when the index breaks
	DegradeFor   time.Duration // how long it stays broken (0: for good)
	Plain        bool          // log lines instead of a redrawn screen
	Refresh      time.Duration // how often the view updates

	GRPCEndpoint     string
	HTTPOTLPEndpoint string
	HTTPEndpoint     string
	NATSEndpoint     string
	DataDir          string // "" uses a temporary directory removed at the end
}

// AlertEvent is one alert's life in the demo.
type AlertEvent struct {
	Rule     string
	Kind     string
	Severity string
	FiredAt  time.Duration // since the demo started
	Resolved time.Duration // 0 if still firing
	Value    float64
	Worst    []string // trace ids
	// Diagnosis is the pattern the alert was diagnosed with ("none" when none showed).
	Diagnosis string
	// ChangeAt is, for a change SLO, when its detector says the change began (since the demo
	// started); HasChange tells whether there is one.
	ChangeAt  time.Duration
	HasChange bool
}

// Summary is what the demo reports at the end.
type Summary struct {
	Requests     int64
	SendErrors   int64
	Feedback     int64
	Scores       map[string]scoreStat
	Alerts       []AlertEvent
	DegradedFrom time.Duration
	DegradedTo   time.Duration
	// Comparisons are the online comparisons' last states (GET /api/v1/comparisons).
	Comparisons []comparison.Status
}

type scoreStat struct {
	N    uint64
	Mean float64
}

// Run starts ragwatch and the synthetic app, shows the live view on out and returns the
// summary when Duration passes or ctx ends.
func Run(ctx context.Context, o Options, out io.Writer) (Summary, error) {
	if o.Rate <= 0 {
		return Summary{}, errors.New("rate must be positive")
	}
	if o.Refresh <= 0 {
		o.Refresh = time.Second
	}
	if o.DataDir == "" {
		dir, err := os.MkdirTemp("", "ragwatch-demo-")
		if err != nil {
			return Summary{}, err
		}
		defer os.RemoveAll(dir)
		o.DataDir = dir
	}
	cfg, _, err := Config(o)
	if err != nil {
		return Summary{}, err
	}
	// ragwatch's own logs would tear the live view; keep warnings in plain mode only.
	logger := slog.New(slog.DiscardHandler)
	if o.Plain {
		logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	a, err := service.New(cfg, logger)
	if err != nil {
		return Summary{}, fmt.Errorf("build ragwatch: %w", err)
	}
	if err := a.Start(ctx); err != nil {
		return Summary{}, fmt.Errorf("start ragwatch: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = a.Shutdown(sctx)
	}()

	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(o.GRPCEndpoint), otlptracegrpc.WithInsecure())
	if err != nil {
		return Summary{}, fmt.Errorf("OTLP exporter: %w", err)
	}
	res, _ := resource.Merge(resource.Empty(), resource.NewSchemaless(semconv.ServiceName("support-bot")))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(200*time.Millisecond)),
		sdktrace.WithIDGenerator(synth.IDGenerator{}),
		sdktrace.WithResource(res),
	)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}()
	tracer := tp.Tracer("ragwatch-demo-app")

	runCtx := ctx
	if o.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	d := &demo{opts: o, app: a, gen: synth.New(synth.Options{Seed: o.Seed}), start: time.Now(),
		alerts: map[string]*AlertEvent{}, out: out, feedbackURL: "http://" + o.HTTPEndpoint + "/api/v1/feedback"}
	if !o.Plain {
		fmt.Fprint(out, "\033[?25l") // hide the cursor while redrawing
		defer fmt.Fprint(out, "\033[?25h")
	}
	d.printIntro()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.traffic(runCtx, tracer)
	}()
	tick := time.NewTicker(o.Refresh)
	defer tick.Stop()
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case <-tick.C:
			d.observe()
			d.render()
		}
	}
	wg.Wait()
	d.fb.Wait()
	d.observe()
	s := d.summary()
	printSummary(out, s)
	return s, nil
}

type demo struct {
	opts        Options
	app         *service.App
	gen         *synth.Generator
	start       time.Time
	out         io.Writer
	feedbackURL string

	sent, sendErrs, feedback atomic.Int64
	fb                       sync.WaitGroup

	mu           sync.Mutex // guards the fields below
	phase        string
	degradedFrom time.Duration
	degradedTo   time.Duration
	alerts       map[string]*AlertEvent // by fingerprint
	order        []string
	lastLines    []string
}

func (d *demo) since() time.Duration { return time.Since(d.start).Round(100 * time.Millisecond) }
