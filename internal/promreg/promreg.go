// Package promreg registers Prometheus collectors that several components of one process may
// register on the same registry: the sidecar and its in-process workers, the assembler and the
// join, a scorer built twice. The second registration gets the collector already there.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg and returns it, or returns the collector already registered
// with the same description when it is a T. Any other refusal is returned as an error.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, err
}

// MustRegister is Register for metrics whose description is fixed in the program: a refusal is
// a programming error, and it panics.
func MustRegister[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	c, err := Register(reg, c)
	if err != nil {
		panic(err)
	}
	return c
}
