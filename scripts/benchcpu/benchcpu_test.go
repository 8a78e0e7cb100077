package benchcpu

import (
	"testing"
	"time"
)

// Now measures this process's CPU, not the wall clock: a busy loop advances it, a sleep
// hardly does.
func TestNowCountsCPUNotWallTime(t *testing.T) {
	c0 := Now()
	time.Sleep(100 * time.Millisecond)
	if slept := Now() - c0; slept > 50*time.Millisecond {
		t.Errorf("a 100ms sleep counted %v of CPU", slept)
	}
	c1 := Now()
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for Now()-c1 < 20*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("10s of busy loop counted only %v of CPU", Now()-c1)
		}
		x++
	}
	if c0 <= 0 || x == 0 {
		t.Fatalf("CPU time %v, %d iterations", c0, x)
	}
}

func BenchmarkReport(b *testing.B) {
	defer Report(b)()
	for range b.N {
		_ = Now()
	}
}
