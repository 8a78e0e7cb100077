package service

import (
	"log/slog"
	"math"
	"runtime/debug"
	"testing"
	"testing/fstest"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/memlimit"
)

// In a 128 MiB container with no GOMEMLIMIT and no memory_limit_mib, the guard and
// assembly.max_bytes follow the cgroup: before, the guard had no limit and max_bytes stayed at
// 256 MiB, whose flood (≈ 2.2 × max_bytes resident) exceeds the container by itself.
func TestMemoryDefaultsFollowTheCgroup(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	if prev != math.MaxInt64 {
		t.Skip("a Go memory limit is already set in this environment")
	}
	t.Setenv("GOMEMLIMIT", "")
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })

	cfg := config.Default()
	o := &options{cgroup: fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"sys/fs/cgroup/memory.max": {Data: []byte("134217728\n")},
	}}
	goLimitFromCgroup(o, slog.New(slog.DiscardHandler))
	g := newGuard(cfg, o, nil)
	cgroupLimit := float64(128 << 20)
	goLimit := memlimit.GoLimit(int64(cgroupLimit))
	if got := debug.SetMemoryLimit(-1); got != 80<<20 || got != goLimit {
		t.Fatalf("Go memory limit = %d, want %d (memory.max less memlimit.NonGoReserve)", got, goLimit)
	}
	if got, want := g.Limit(), uint64(goLimit)/10*9; got != want {
		t.Fatalf("guard limit = %d, want %d", got, want)
	}
	a := assemblyConfig(cfg.Assembly, g)
	if want := int64(g.Limit() / 4); a.MaxBytes != want {
		t.Fatalf("assembly.max_bytes = %d, want %d (a quarter of the guard's limit)", a.MaxBytes, want)
	}
	if flood := float64(a.MaxBytes) * 2.2; flood > 0.6*float64(128<<20) {
		t.Fatalf("a flood would take %.0f MiB of a 128 MiB container", flood/(1<<20))
	}
}

func TestAssemblyMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		set      int64
		limitMiB int
		want     int64
	}{
		{"set by the file", 1 << 20, 100, 1 << 20},
		{"no limit", 0, 0, config.DefaultAssemblyMaxBytes},
		{"quarter of the limit", 0, 400, 100 << 20},
		{"capped at the old default", 0, 4096, config.DefaultAssemblyMaxBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g *memlimit.Guard
			if tc.limitMiB > 0 {
				g = memlimit.New(tc.limitMiB, nil)
			}
			if got := assemblyConfig(config.Assembly{MaxBytes: tc.set}, g).MaxBytes; got != tc.want {
				t.Fatalf("max_bytes = %d, want %d", got, tc.want)
			}
		})
	}
}
