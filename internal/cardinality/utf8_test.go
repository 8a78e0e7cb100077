package cardinality

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A service name that is not valid UTF-8 (OTLP protobuf strings are not checked on decode)
// must map to Other: Prometheus panics on such a label value, which would crash the process.
func TestServiceSetInvalidUTF8(t *testing.T) {
	s := NewServiceSet(10)
	for _, in := range []string{"\xf4", "svc-\xff\xfe", string([]byte{0xc3})} {
		got := s.Label(in)
		if got != Other {
			t.Errorf("Label(%q) = %q, want %q", in, got, Other)
		}
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"service"})
		c.WithLabelValues(got).Inc() // would panic with the raw name
	}
	if got := s.Label("héllo-wörld"); got != "héllo-wörld" {
		t.Errorf("valid UTF-8 name = %q", got)
	}
}
