// Package labels bounds label values that come from outside, such as service.name, so that
// metric cardinality stays fixed whatever the traffic.
package labels

import (
	"sync"
	"unicode/utf8"
)

// Other is the label value for everything past the cap.
const Other = "other"

// ServiceSet admits the first Max distinct service names as label values; later ones map to
// Other. It is safe for concurrent use. One set is shared by every package of a process so a
// service is labelled the same way everywhere.
type ServiceSet struct {
	max  int
	mu   sync.RWMutex
	seen map[string]struct{}
}

// NewServiceSet returns a set admitting at most max services (max <= 0 admits none).
func NewServiceSet(max int) *ServiceSet {
	return &ServiceSet{max: max, seen: make(map[string]struct{})}
}

// Label returns the label value for service: itself if admitted, else Other. An empty name
// is "unknown"; a name longer than 128 bytes or not valid UTF-8 is Other.
func (s *ServiceSet) Label(service string) string {
	if service == "" {
		service = "unknown"
	}
	// Prometheus panics on a label value that is not valid UTF-8, and OTLP protobuf decoding
	// does not check strings: such a name must never become a label.
	if len(service) > 128 || !utf8.ValidString(service) {
		return Other
	}
	s.mu.RLock()
	_, ok := s.seen[service]
	s.mu.RUnlock()
	if ok {
		return service
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[service]; ok {
		return service
	}
	if len(s.seen) >= s.max {
		return Other
	}
	s.seen[service] = struct{}{}
	return service
}
