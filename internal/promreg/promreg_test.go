package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterSharesTheCollectorAlreadyThere(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "ragwatch_test_total", Help: "A test counter."}
	first := MustRegister(reg, prometheus.NewCounter(opts))
	second := MustRegister(reg, prometheus.NewCounter(opts))
	if first != second {
		t.Fatal("the second registration did not get the first counter")
	}
	second.Inc()
	if n, _ := reg.Gather(); len(n) != 1 || n[0].GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Fatalf("gathered %v, want one counter at 1", n)
	}
	// The same name with another help is a different description: refused.
	if _, err := Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "ragwatch_test_total", Help: "Other."})); err == nil {
		t.Fatal("a conflicting description was accepted")
	}
	// Already there, but not a T: refused too.
	if _, err := Register(reg, prometheus.NewCounterVec(opts, []string{"x"})); err == nil {
		t.Fatal("a collector of another type was accepted")
	}
}
