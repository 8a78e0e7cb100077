package ring

import (
	"testing"
	"time"
)

func TestRingWindowAndReuse(t *testing.T) {
	r := New[int](time.Minute, 5*time.Minute)
	if len(r.Slots) != 6 {
		t.Fatalf("slots = %d, want 6", len(r.Slots))
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 10; i++ {
		*r.At(t0.Add(time.Duration(i) * time.Minute)) += i + 1
	}
	sum := func(now time.Time, w time.Duration) int {
		s := 0
		r.Window(now, w, func(v *int) { s += *v })
		return s
	}
	now := t0.Add(9*time.Minute + 30*time.Second)
	if got := sum(now, 3*time.Minute); got != 10+9+8 {
		t.Fatalf("3m window = %d, want 27", got)
	}
	if got := sum(now, 5*time.Minute); got != 10+9+8+7+6 {
		t.Fatalf("5m window = %d, want 40", got)
	}
	// Older than the ring holds: dropped, not written over a newer bucket.
	if p := r.At(t0); p != nil {
		t.Fatalf("stale bucket returned")
	}
	// Ten minutes later nothing is left in the window.
	if got := sum(now.Add(10*time.Minute), 5*time.Minute); got != 0 {
		t.Fatalf("expired window = %d, want 0", got)
	}
	// Writing reuses a slot and resets it.
	*r.At(now.Add(10 * time.Minute)) += 100
	if got := sum(now.Add(10*time.Minute), time.Minute); got != 100 {
		t.Fatalf("reused slot = %d, want 100", got)
	}
}
