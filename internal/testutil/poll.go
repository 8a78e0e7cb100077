package testutil

import (
	"testing"
	"time"
)

// Eventually calls cond every step until it returns true, and fails tb naming what when it has
// not within the given time. A passing test returns as soon as the condition holds, so within
// can be generous for a loaded machine.
func Eventually(tb testing.TB, within, step time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(step)
	}
}

// CheckFor calls f every step until it returns nil, and fails tb with what and f's last error
// when it has not within the given time.
func CheckFor(tb testing.TB, within, step time.Duration, what string, f func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(step)
	}
}
