// Package memlimit keeps ragwatch's memory bounded under any input: above a limit, intake is
// refused with OTLP's retryable errors instead of growing the heap. The limit defaults to 90%
// of GOMEMLIMIT; with no GOMEMLIMIT, FromCgroup derives one from the container's cgroup, so the
// guard works in a container without configuration.
package memlimit

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Guard samples the Go heap and says when intake must be refused. The zero value never refuses.
type Guard struct {
	limit    uint64 // bytes; 0 = no limit
	interval time.Duration
	read     func() uint64

	overloaded atomic.Bool
	used       atomic.Uint64
	refused    prometheus.Counter

	// mu guards the reservations of requests admitted but not finished (Admit).
	mu       sync.Mutex
	reserved uint64
	inflight int

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// New returns a guard refusing intake when the live heap exceeds limitMiB. limitMiB 0 takes
// 90% of GOMEMLIMIT when one is set, else no limit. reg may be nil.
func New(limitMiB int, reg prometheus.Registerer) *Guard {
	limit := uint64(limitMiB) << 20
	if limit == 0 {
		limit = GoMemLimit() / 10 * 9
	}
	g := &Guard{limit: limit, interval: 100 * time.Millisecond, read: heapBytes, stop: make(chan struct{})}
	g.refused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ragwatch_memory_refusals_total",
		Help: "Intake requests refused because the heap was above the memory limit.",
	})
	if reg != nil {
		reg.MustRegister(g.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ragwatch_memory_limit_bytes",
			Help: "Heap size above which intake is refused (0: no limit).",
		}, func() float64 { return float64(g.limit) }))
	}
	return g
}

// GoMemLimit is the Go runtime's memory limit in bytes (GOMEMLIMIT, or what FromCgroup set),
// 0 when there is none.
func GoMemLimit() uint64 {
	if gl := debug.SetMemoryLimit(-1); gl > 0 && gl != math.MaxInt64 {
		return uint64(gl)
	}
	return 0
}

// NewWithReader is New with the heap read by read every interval instead of from the
// runtime: tests drive a guard through overload and recovery with it.
func NewWithReader(limitMiB int, read func() uint64, interval time.Duration, reg prometheus.Registerer) *Guard {
	g := New(limitMiB, reg)
	g.read = read
	if interval > 0 {
		g.interval = interval
	}
	return g
}

// Limit returns the limit in bytes (0: none).
func (g *Guard) Limit() uint64 {
	if g == nil {
		return 0
	}
	return g.limit
}

// Start samples the heap every interval until Shutdown. Start with no limit does nothing.
func (g *Guard) Start(context.Context) error {
	if g == nil || g.limit == 0 {
		return nil
	}
	g.sample()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		t := time.NewTicker(g.interval)
		defer t.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-t.C:
				g.sample()
			}
		}
	}()
	return nil
}

// Shutdown stops sampling. Idempotent, safe without Start.
func (g *Guard) Shutdown(context.Context) error {
	if g == nil {
		return nil
	}
	g.once.Do(func() { close(g.stop) })
	g.wg.Wait()
	return nil
}

func (g *Guard) sample() {
	used := g.read()
	g.used.Store(used)
	// Hysteresis: refuse above the limit, accept again below 90% of it, so intake does not
	// flap on every sample.
	if used > g.limit {
		g.overloaded.Store(true)
	} else if used < g.limit/10*9 {
		g.overloaded.Store(false)
	}
}

// Refuse reports whether intake must be refused now, counting the refusal.
func (g *Guard) Refuse() bool {
	if g == nil || !g.overloaded.Load() {
		return false
	}
	g.refused.Inc()
	return true
}

// DecodeFactor is what Admit charges per declared byte of a request: the body itself plus
// what decoding builds from it (pdata for OTLP/JSON and NATS, then the assembler's copies;
// OTLP protobuf is decoded straight into the assembler's spans, which allocates less) while
// the request is handled. Measured with pdata on 50 five-span RAG traces with 5 × 1 KB
// documents (357 KB a request): after a GC, the decoded pdata request holds 1.51 × its wire
// size live, on top of the body (1 ×) and the copies the assembler makes of what it keeps;
// 4 errs on the side of refusing.
const DecodeFactor = 4

// Admit is Refuse for a request of size bytes (its declared or largest possible body) that is
// about to be read: it reserves DecodeFactor × size of the room left under the limit until
// release is called, once the request is handled. The heap is only sampled every interval, so
// without reservations a burst of large requests would all pass the heap check before any of
// them allocates; with them, a request that does not fit next to those in flight is refused
// (retryable), and large requests are admitted one at a time. A request that finds nothing
// in flight is admitted whatever its size, so one request larger than the limit still gets in
// when the heap is below it. ok false counts a refusal.
func (g *Guard) Admit(size int64) (release func(), ok bool) {
	if g == nil || g.limit == 0 {
		return func() {}, true
	}
	if g.Refuse() {
		return nil, false
	}
	cost := uint64(max(size, 0)) * DecodeFactor
	g.mu.Lock()
	if g.inflight > 0 && g.used.Load()+g.reserved+cost > g.limit {
		g.mu.Unlock()
		g.refused.Inc()
		return nil, false
	}
	g.reserved += cost
	g.inflight++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.reserved -= cost
			g.inflight--
			g.mu.Unlock()
		})
	}, true
}

// RetryAfter is what refusals tell clients to wait.
const RetryAfter = 5 * time.Second

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
var heapMu sync.Mutex

func heapBytes() uint64 {
	heapMu.Lock()
	defer heapMu.Unlock()
	metrics.Read(heapSample)
	if heapSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return heapSample[0].Value.Uint64()
}

// Released is what ReleaseExecutablePages did: the resident file-backed memory of the process
// (/proc/self/status RssFile, in bytes) before and after, and the bytes of the executable's
// mappings it asked the kernel to reclaim.
type Released struct {
	Before, After int64
	Advised       int64
}
