package decide

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// registerOrGet registers c, or returns the collector already registered under the same
// description, so that components sharing a registry (the sidecar and its in-process workers)
// share one metric instead of panicking.
func registerOrGet[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
