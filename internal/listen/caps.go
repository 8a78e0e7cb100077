package listen

import (
	"fmt"

	"github.com/ragwatch/ragwatch/internal/memlimit"
)

// What the caps are derived from.
const (
	// Listeners is how many listeners ragwatch opens at most: /metrics, the API, OTLP gRPC
	// and OTLP HTTP. Each gets the same cap, so a flood on one leaves the others their share.
	Listeners = 4
	// ConnCost is what one connection may hold at worst before its request is handled: the
	// headers up to MaxHeaderBytes in a buffer that grows by doubling, net/http's read and
	// write buffers and the goroutine's stack. Measured by TestConnCost: 48 KiB after a GC with
	// 32 KiB headers; twice that for the garbage the growing buffer leaves until the next GC.
	ConnCost = 96 << 10
	// MemoryShare is the part of the memory limit all listeners' connections may take
	// together: 1/MemoryShare. The rest is for the work itself (the memory guard refuses
	// intake at 90% of the limit).
	MemoryShare = 8
	// DefaultMaxConns is the cap of each listener when no memory limit is known (GOMEMLIMIT
	// unset and no cgroup limit), still bounded by the descriptors.
	DefaultMaxConns = 1024
	// MinConns is the smallest cap the memory limit yields: a Prometheus scrape, the kubelet's
	// probes and an app's exporters must fit on the smallest pod.
	MinConns = 16
	// MinFDReserve is the fewest descriptors kept out of the listeners' reach, for the
	// NATS store's files and connections, outgoing connections (judges, exporters, webhooks)
	// and the files ragwatch opens; FDReserveShare of the limit when that is more.
	MinFDReserve   = 256
	FDReserveShare = 4
)

// Budget is what the listeners' caps are derived from.
type Budget struct {
	MemoryLimit uint64 // bytes the process may use (the Go memory limit); 0: unknown
	FDLimit     uint64 // the soft RLIMIT_NOFILE; 0: unknown
}

// Caps are the connection caps derived from a Budget.
type Caps struct {
	Budget
	// PerListener is each listener's cap: at most MemoryLimit/MemoryShare/Listeners/ConnCost
	// (at least MinConns) and at most (FDLimit-FDReserve)/Listeners.
	PerListener int
	// FDReserve is the descriptors the listeners together cannot take.
	FDReserve uint64
	// By says which limit set PerListener: "memory", "fds" or "default".
	By string
}

// ProcessBudget is this process's budget: the Go memory limit and the soft fd limit. The
// listeners of the service and the embedded NATS server's client port take their caps from it.
func ProcessBudget() Budget {
	return Budget{MemoryLimit: memlimit.GoMemLimit(), FDLimit: FDLimit()}
}

// Caps derives the per-listener cap.
func (b Budget) Caps() Caps {
	c := Caps{Budget: b, PerListener: DefaultMaxConns, By: "default"}
	if b.MemoryLimit > 0 {
		c.PerListener = max(int(b.MemoryLimit/MemoryShare/Listeners/ConnCost), MinConns)
		c.By = "memory"
	}
	if b.FDLimit > 0 {
		c.FDReserve = max(b.FDLimit/FDReserveShare, MinFDReserve)
		share := uint64(Listeners) // a limit too small for the reserve still lets each listener hold one
		if b.FDLimit > c.FDReserve+share {
			share = b.FDLimit - c.FDReserve
		}
		if byFD := share / Listeners; byFD < uint64(c.PerListener) {
			c.PerListener, c.By = int(byFD), "fds"
		}
	}
	return c
}

// String is what the start-up log shows.
func (c Caps) String() string {
	return fmt.Sprintf("%d connections per listener (by %s; memory limit %d bytes, fd limit %d, fd reserve %d)",
		c.PerListener, c.By, c.MemoryLimit, c.FDLimit, c.FDReserve)
}
