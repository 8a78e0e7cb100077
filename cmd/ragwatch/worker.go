package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
)

func init() {
	register("worker", "run only scoring workers against an external NATS (nats.url)", runWorker)
}

// runWorker runs scoring workers only: the same worker.Pool `ragwatch run` runs in process,
// pulling from the durable consumer on the cluster the sidecars queue to. It is built from the
// same component list as `ragwatch run` (service.NewWorker), so its HTTP server is run's, with
// http.tls and http.auth.
func runWorker(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var path string
	fs.StringVar(&path, "c", "", "config file (YAML)")
	fs.StringVar(&path, "config", "", "config file (YAML)")
	logFormat := fs.String("log-format", "", "text or json (overrides log.format)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (overrides log.level)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "how long a graceful shutdown may take")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
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
	if err := service.CheckWorkerConfig(cfg); err != nil {
		fmt.Fprintln(stderr, "ragwatch worker:", err)
		return 2
	}
	logger, err := newLogger(stderr, cfg.Log, &slog.LevelVar{})
	if err != nil {
		fmt.Fprintln(stderr, "ragwatch worker:", err)
		return 2
	}
	if err := serveWorker(ctx, cfg, logger, *shutdownTimeout); err != nil {
		logger.Error("ragwatch worker stopped", "err", err)
		return 1
	}
	return 0
}

// serveWorker runs until ctx ends, then drains: the HTTP server stops, records being scored
// are nak'ed for another worker, and the NATS connection closes.
func serveWorker(ctx context.Context, cfg *config.Config, logger *slog.Logger, shutdownTimeout time.Duration) error {
	a, err := service.NewWorker(cfg, logger)
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		return err // Start has shut down what it started
	}
	releaseStartupPages(logger)
	<-ctx.Done()
	logger.Info("ragwatch worker stopping", "timeout", shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	return a.Shutdown(sctx)
}
