package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/labels"
	"github.com/ragwatch/ragwatch/internal/natsconn"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/queue"
	"github.com/ragwatch/ragwatch/sampler/scorers"
	"github.com/ragwatch/ragwatch/sampler/worker"
)

func init() {
	register("worker", "run only scoring workers against an external NATS (nats.url)", runWorker)
}

// runWorker runs scoring workers only: the same worker.Pool `ragwatch run` runs in process,
// pulling from the durable consumer on the cluster the sidecars queue to.
func runWorker(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var path string
	fs.StringVar(&path, "c", "", "config file (YAML)")
	fs.StringVar(&path, "config", "", "config file (YAML)")
	logFormat := fs.String("log-format", "", "text or json (overrides log.format)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (overrides log.level)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, "ragwatch worker:", err)
		return 2
	}
	if *logFormat != "" {
		cfg.Log.Format = *logFormat
	}
	if *logLevel != "" {
		cfg.Log.Level = *logLevel
	}
	if err := cfg.Log.Validate(); err != nil {
		fmt.Fprintln(stderr, "ragwatch worker:", err)
		return 2
	}
	if cfg.NATS.URL == "" {
		fmt.Fprintln(stderr, "ragwatch worker: `nats.url` is required: workers pull from the cluster the sidecars queue to")
		return 2
	}
	if cfg.Scoring.Workers <= 0 {
		fmt.Fprintln(stderr, "ragwatch worker: `scoring.workers` must be positive")
		return 2
	}
	logger := newWorkerLogger(cfg.Log, stderr)
	if err := serveWorker(ctx, cfg, logger); err != nil {
		logger.Error("ragwatch worker stopped", "err", err)
		return 1
	}
	return 0
}

func newWorkerLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(c.Level)))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serveWorker runs until ctx ends, then drains: in-flight records are nak'ed for another worker.
func serveWorker(ctx context.Context, cfg *config.Config, logger *slog.Logger) (err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	cctx, cancel := context.WithTimeout(ctx, max(cfg.NATS.ConnectTimeout, 5*time.Second)+5*time.Second)
	conn, err := natsconn.Connect(cctx, cfg.NATS, reg, logger)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()

	// Judge prompts and explanations leave the process: redact them as the sidecar does.
	redactor, err := service.NewRedactor(cfg, reg)
	if err != nil {
		return err
	}
	active, err := scorers.Build(cfg.Scoring, reg, logger.With("component", "scorers"), service.JudgeRedaction(redactor)...)
	if err != nil {
		return fmt.Errorf("build scorers: %w", err)
	}
	active = service.RedactScorers(active, redactor)
	if len(active) == 0 {
		return errors.New("no scorers are enabled (scoring.metrics / scoring.retrieval_k)")
	}
	budget := decide.NewBudget(cfg.Sampling.Budget, nil, reg, logger)
	sink := score.Fanout{queue.NewScorePublisher(conn.NC, cfg.Scoring.Queue.ScoresSubjectPrefix)}
	pool := worker.New(conn.JS, cfg.Scoring.ScoringRuntime, active, sink, worker.Options{
		Replicas:   conn.Replicas,
		Budget:     budget,
		Services:   labels.NewServiceSet(cfg.Signals.MaxServices),
		Registerer: reg,
		Logger:     logger,
	})

	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() || !conn.NC.IsConnected() {
			http.Error(w, "not ready: NATS not connected or workers not started", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	ln, err := net.Listen("tcp", cfg.HTTP.Endpoint)
	if err != nil {
		return fmt.Errorf("listen on `http.endpoint` %s: %w", cfg.HTTP.Endpoint, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
		close(serveErr)
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-serveErr
	}()

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = pool.Start(sctx)
	cancel()
	if err != nil {
		return errors.Join(err, pool.Shutdown(context.WithoutCancel(ctx)))
	}
	ready.Store(true)
	logger.Info("ragwatch worker ready", "http", ln.Addr().String(), "workers", cfg.Scoring.Workers)

	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	ready.Store(false)
	logger.Info("ragwatch worker stopping")
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return errors.Join(err, pool.Shutdown(dctx))
}
