// Package benchcpu reports the CPU time a benchmark costs the whole process — user and system,
// all threads, garbage collection included — per operation, as the cpu-ns/op metric. On a
// shared machine wall-clock ns/op measures the neighbours too; docs/performance.md compares
// cpu-ns/op.
package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// Report starts measuring; call the function it returns when the measured loop ends (e.g.
// `defer benchcpu.Report(b)()`) to report cpu-ns/op over b.N operations.
func Report(b *testing.B) func() {
	start := Now()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(Now()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// Now is the process's CPU time so far (getrusage RUSAGE_SELF: user + system), 0 when the
// system cannot tell.
func Now() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
