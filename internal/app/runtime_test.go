package app_test

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/app"
)

func TestApplyRuntime(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	if got := app.ApplyRuntime(config.Runtime{GOGC: 50}, nil); got != 50 {
		t.Fatalf("in force: %d, want 50", got)
	}
	if got := debug.SetGCPercent(50); got != 50 {
		t.Fatalf("GC percent %d after runtime.gogc 50", got)
	}
	if def := config.Default().Runtime.GOGC; def != 50 {
		t.Fatalf("default runtime.gogc %d, want 50", def)
	}

	// The environment wins, as it does for any Go program; the runtime read it at start, so
	// set the value it would have read.
	t.Setenv("GOGC", "120")
	debug.SetGCPercent(120)
	var logs bytes.Buffer
	got := app.ApplyRuntime(config.Runtime{GOGC: 50}, slog.New(slog.NewTextHandler(&logs, nil)))
	if got != 120 || debug.SetGCPercent(120) != 120 {
		t.Fatalf("GOGC=120 in the environment: in force %d", got)
	}
	if !strings.Contains(logs.String(), `msg="the GOGC environment variable wins over runtime.gogc" GOGC=120 runtime.gogc=50`) {
		t.Fatalf("log: %s", logs.String())
	}
}
