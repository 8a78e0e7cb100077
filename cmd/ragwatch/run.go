package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/memlimit"
)

func init() {
	register("run", "run the sidecar: OTLP in, records assembled, signals out", runCommand)
}

func runCommand(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var path, logFormat, logLevel string
	fs.StringVar(&path, "c", "", "config file (YAML); none runs on the defaults")
	fs.StringVar(&path, "config", "", "same as -c")
	fs.StringVar(&logFormat, "log-format", "", "log format: json or text (default from the config: text)")
	fs.StringVar(&logLevel, "log-level", "", "log level: debug, info, warn or error (default from the config: info)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "how long a graceful shutdown may take")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ragwatch run: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintf(stderr, "ragwatch run: invalid config:\n%s\n", indent(err.Error()))
		return 1
	}
	if logFormat != "" {
		cfg.Log.Format = logFormat
	}
	if logLevel != "" {
		cfg.Log.Level = logLevel
	}
	level := &slog.LevelVar{}
	logger, err := newLogger(stderr, cfg.Log, level)
	if err != nil {
		fmt.Fprintf(stderr, "ragwatch run: %v\n", err)
		return 2
	}
	source := path
	if source == "" {
		source = "defaults"
	}
	logger.Info("starting ragwatch", "version", version, "config", source)

	// SIGHUP and POST /api/v1/reload read the file again, with the same flag overrides; a
	// level given with -log-level stays fixed.
	load := func() (*config.Config, error) {
		c, err := config.Load(path)
		if err == nil && logFormat != "" {
			c.Log.Format = logFormat
		}
		return c, err
	}
	opts := []service.Option{service.WithConfigSource(load)}
	if logLevel == "" {
		opts = append(opts, service.WithLogLevel(level))
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	a, err := service.New(cfg, logger, opts...)
	if err != nil {
		logger.Error("cannot build the pipeline", "err", err)
		return 1
	}
	if err := a.Start(ctx); err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	releaseStartupPages(logger)
	reloadOnSignal(ctx, a, hup, logger)
	logger.Info("shutting down: stopping intake, assembling held traces, flushing exporters", "timeout", *shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *shutdownTimeout)
	defer cancel()
	start := time.Now()
	if err := a.Shutdown(sctx); err != nil {
		logger.Error("shutdown incomplete", "err", err, "took", time.Since(start))
		return 1
	}
	logger.Info("stopped", "took", time.Since(start))
	return 0
}

// releaseStartupPages gives the kernel back the pages of the executable that starting touched
// and serving does not need (memlimit.ReleaseExecutablePages): about 10 MiB of resident memory.
func releaseStartupPages(logger *slog.Logger) {
	r, err := memlimit.ReleaseExecutablePages()
	if err != nil {
		logger.Debug("the executable's startup pages stay resident", "err", err)
		return
	}
	logger.Info("released the executable's startup pages", "resident_file_bytes_before", r.Before, "resident_file_bytes_after", r.After)
}

// reloadOnSignal reloads the config on every signal from hup until ctx ends. Reload logs its
// outcome (errors at error level) and keeps the running config when the new one is bad.
func reloadOnSignal(ctx context.Context, a *service.App, hup <-chan os.Signal, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			logger.Info("SIGHUP: reloading the config")
			_, _ = a.Reload()
		}
	}
}

// newLogger builds the process logger from the `log` config section; level is set from it and
// may be changed later (a reload).
func newLogger(w io.Writer, c config.Log, level *slog.LevelVar) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("log level must be debug, info, warn or error, got %q", c.Level)
	}
	level.Set(l)
	opts := &slog.HandlerOptions{Level: level}
	switch c.Format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format must be json or text, got %q", c.Format)
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
