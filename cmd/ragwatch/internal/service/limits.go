package service

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/collector/otlp"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/memlimit"
)

// WithHeapReader makes the memory guard read the heap size with read every interval instead of
// from the runtime, so tests can drive intake through overload and recovery.
func WithHeapReader(read func() uint64, interval time.Duration) Option {
	return func(o *options) { o.heap, o.heapInterval = read, interval }
}

// newGuard builds the memory guard of cfg.Limits.MemoryLimitMiB (GOMEMLIMIT-aware).
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

// otlpLimits maps the limits section onto the OTLP receivers' limits (zero keeps a default).
func otlpLimits(cfg *config.Config) otlp.Limits {
	in := cfg.Limits.Intake
	return otlp.Limits{
		MaxRequestBytes:        cfg.Receivers.OTLP.MaxRequestBytes,
		MaxSpansPerRequest:     in.MaxSpansPerRequest,
		MaxAttributesPerSpan:   in.MaxAttributesPerSpan,
		MaxAttributeValueBytes: in.MaxAttributeValueBytes,
		MaxJSONDepth:           in.MaxJSONDepth,
	}
}
