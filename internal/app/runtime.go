package app

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/ragwatch/ragwatch/config"
)

// ApplyRuntime sets the Go runtime's knobs from cfg.Runtime: the garbage collector's target
// (runtime.gogc), unless the GOGC environment variable is set, which wins as it does for any
// Go program. The Go collector's go_gc_gogc_percent on /metrics shows the value in force. It
// returns the value in force.
func ApplyRuntime(r config.Runtime, logger *slog.Logger) int {
	if env := os.Getenv("GOGC"); env != "" {
		cur := debug.SetGCPercent(100)
		debug.SetGCPercent(cur) // read it back unchanged
		if logger != nil && r.GOGC != cur {
			logger.Info("the GOGC environment variable wins over runtime.gogc", "GOGC", env, "runtime.gogc", r.GOGC)
		}
		return cur
	}
	debug.SetGCPercent(r.GOGC)
	return r.GOGC
}
