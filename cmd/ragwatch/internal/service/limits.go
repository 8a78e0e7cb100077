package service

import (
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/listen"
	"github.com/ragwatch/ragwatch/internal/memlimit"
)

// listenLimits are the bounds of every listener (listen.Limits), with the connection cap
// derived from the Go memory limit (set from the cgroup above when the environment did not)
// and the descriptor limit, and the metrics that count their connections. Derived and logged
// once, when the first listener is built.
func (b *builder) listenLimits() (listen.Limits, *listen.Metrics) {
	if b.listenMetrics == nil {
		caps := listen.ProcessBudget().Caps()
		b.logger("listen").Info("listener limits",
			"max_connections_per_listener", caps.PerListener, "derived_from", caps.By,
			"memory_limit_bytes", caps.MemoryLimit, "fd_limit", caps.FDLimit, "fd_reserve", caps.FDReserve,
			"max_header_bytes", listen.MaxHeaderBytes, "read_header_timeout", listen.ReadHeaderTimeout,
			"idle_timeout", listen.IdleTimeout)
		b.listenMetrics = listen.NewMetrics(b.Registry)
		b.listen = listen.Limits{MaxConns: caps.PerListener}
	}
	return b.listen, b.listenMetrics
}

// WithHeapReader makes the memory guard read the heap size with read every interval instead of
// from the runtime, so tests can drive intake through overload and recovery.
func WithHeapReader(read func() uint64, interval time.Duration) Option {
	return func(o *options) { o.heap, o.heapInterval = read, interval }
}

// WithCgroupFS reads the container's memory limit from fsys (rooted at "/") instead of the
// machine's, so tests can fake cgroup files. The limit is applied only without GOMEMLIMIT.
func WithCgroupFS(fsys fs.FS) Option { return func(o *options) { o.cgroup = fsys } }

// goLimitFromCgroup sets the Go runtime's memory limit from the cgroup's (memlimit.GoLimit:
// 90% of it, at most the limit less what Go does not count) when the environment sets no
// GOMEMLIMIT, in both modes: the GC then works before the container is at
// its limit, and in run mode the guard (memory_limit_mib 0: 90% of it) and assembly.max_bytes
// follow it.
func goLimitFromCgroup(o *options, log *slog.Logger) {
	fsys := o.cgroup
	if fsys == nil {
		fsys = os.DirFS("/")
	}
	if set, err := memlimit.FromCgroup(fsys, os.Getenv); err != nil {
		log.Warn("no memory limit from the cgroup; set GOMEMLIMIT or memory_limit_mib", "err", err)
	} else if set > 0 {
		log.Info("Go memory limit set from the cgroup", "bytes", set, "reserved_outside_go", memlimit.NonGoReserve)
	}
}

// newGuard builds the memory guard of cfg.Limits.MemoryLimitMiB (0: 90% of the Go memory
// limit, which goLimitFromCgroup set when the environment did not).
func newGuard(cfg *config.Config, o *options, reg prometheus.Registerer) *memlimit.Guard {
	if o.heap != nil {
		return memlimit.NewWithReader(cfg.Limits.MemoryLimitMiB, o.heap, o.heapInterval, reg)
	}
	return memlimit.New(cfg.Limits.MemoryLimitMiB, reg)
}

// refuseFunc is what the receivers ask before reading input; nil when there is no limit, so
// they skip the check.
func refuseFunc(g *memlimit.Guard) func() bool {
	if g.Limit() == 0 {
		return nil
	}
	return g.Refuse
}

// admitFunc is what the OTLP receivers ask with a request's size; nil when there is no limit.
func admitFunc(g *memlimit.Guard) func(int64) (func(), bool) {
	if g.Limit() == 0 {
		return nil
	}
	return g.Admit
}

// Held traces take ≈ 2.2 × assembly.max_bytes of resident memory under a flood of traces that
// never complete (docs/performance-log.md: RSS 596 MiB at max_bytes 256 MiB), so a max_bytes
// above ≈ 45% of the memory limit lets a flood alone reach the limit. A quarter of the guard's
// limit keeps the flood near 55% of it, leaving the rest to everything else.
const assemblyShareOfLimit = 4

// assemblyConfig fills assembly.max_bytes when the file left it 0: a quarter of the memory
// guard's limit, at most 256 MiB; 256 MiB with no limit.
func assemblyConfig(a config.Assembly, g *memlimit.Guard) config.Assembly {
	if a.MaxBytes > 0 {
		return a
	}
	a.MaxBytes = config.DefaultAssemblyMaxBytes
	if l := g.Limit(); l > 0 {
		a.MaxBytes = min(int64(l/assemblyShareOfLimit), config.DefaultAssemblyMaxBytes)
	}
	return a
}

// otlpLimits maps the limits section onto the OTLP receivers' limits (zero keeps a default).
func otlpLimits(cfg *config.Config) span.Limits {
	in := cfg.Limits.Intake
	return span.Limits{
		MaxRequestBytes:        cfg.Receivers.OTLP.MaxRequestBytes,
		MaxSpansPerRequest:     in.MaxSpansPerRequest,
		MaxAttributesPerSpan:   in.MaxAttributesPerSpan,
		MaxAttributeValueBytes: in.MaxAttributeValueBytes,
		MaxJSONDepth:           in.MaxJSONDepth,
	}
}
