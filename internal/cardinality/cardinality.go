// Package cardinality bounds label values that come from outside, such as service.name, so that
// metric cardinality stays fixed whatever the traffic.
package cardinality

import (
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Other is the label value for everything past the cap.
const Other = "other"

// ServiceSet admits up to Max distinct service names as label values; later ones map to Other.
// With a TTL, a name not seen for that long gives its slot up when a new name needs one, and
// the set tells the metrics' owners (OnEvict) to delete its series: junk names sent once cannot
// hold the slots forever, and a real service arriving later gets its own label. It is safe for
// concurrent use. One set is shared by every package of a process so a service is labelled
// the same way everywhere.
type ServiceSet struct {
	max int
	ttl time.Duration // 0: names are kept forever
	now func() time.Time

	mu   sync.RWMutex // guards seen and nextExpiry; lastSeen values are atomic
	seen map[string]*atomic.Int64
	// nextExpiry is the earliest unix-nano time at which a name can have aged out, so a full
	// set does not scan its names for every refused one.
	nextExpiry int64

	evictMu sync.Mutex // guards onEvict
	onEvict []func(service string)
}

// NewServiceSet returns a set admitting at most max services (max <= 0 admits none), kept
// forever.
func NewServiceSet(max int) *ServiceSet {
	return NewServiceSetTTL(max, 0, nil)
}

// NewServiceSetTTL is NewServiceSet whose names age out after ttl without being seen (0: never);
// now is the clock, nil for time.Now.
func NewServiceSetTTL(max int, ttl time.Duration, now func() time.Time) *ServiceSet {
	if now == nil {
		now = time.Now
	}
	return &ServiceSet{max: max, ttl: ttl, now: now, seen: make(map[string]*atomic.Int64)}
}

// OnEvict registers f to be called with each name that ages out, after its slot is free: an
// owner of metrics labelled with it deletes their series and whatever it caches per name. f
// runs on the goroutine whose Label call evicted the name, outside the set's lock. A name seen
// again while f runs may be labelled once more, so a deleted series can come back at zero:
// that is a new series, which rate() treats as a reset.
func (s *ServiceSet) OnEvict(f func(service string)) {
	s.evictMu.Lock()
	defer s.evictMu.Unlock()
	s.onEvict = append(s.onEvict, f)
}

// Admitted reports whether service holds a slot now (its label is itself), without admitting
// it or refreshing it.
func (s *ServiceSet) Admitted(service string) bool {
	if service == "" {
		service = "unknown"
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.seen[service]
	return ok
}

// Label returns the label value for service: itself if admitted, else Other. An empty name
// is "unknown"; a name longer than 128 bytes or not valid UTF-8 is Other.
func (s *ServiceSet) Label(service string) string {
	var now time.Time
	if s.ttl > 0 {
		now = s.now()
	}
	return s.LabelAt(service, now)
}

// LabelAt is Label for a caller that has read the set's clock already (the same clock the
// set was made with): a record's path reads it once, not once per label.
func (s *ServiceSet) LabelAt(service string, at time.Time) string {
	if service == "" {
		service = "unknown"
	}
	// Prometheus panics on a label value that is not valid UTF-8, and OTLP protobuf decoding
	// does not check strings: such a name must never become a label.
	if len(service) > 128 || !utf8.ValidString(service) {
		return Other
	}
	var now int64
	if s.ttl > 0 {
		now = at.UnixNano()
	}
	s.mu.RLock()
	last, ok := s.seen[service]
	s.mu.RUnlock()
	if ok {
		// Refreshed at most once a second: a store on every record would bounce the cache
		// line between cores for a busy service, and the TTL needs no finer time.
		if now != 0 && now-last.Load() >= int64(time.Second) {
			last.Store(now)
		}
		return service
	}
	label, evicted := s.admit(service, now)
	if len(evicted) > 0 {
		s.evictMu.Lock()
		fs := s.onEvict
		s.evictMu.Unlock()
		for _, name := range evicted {
			for _, f := range fs {
				f(name)
			}
		}
	}
	return label
}

// admit adds service if there is room, after evicting the names that aged out when the set
// is full. It returns the label and the evicted names.
func (s *ServiceSet) admit(service string, now int64) (string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.seen[service]; ok {
		last.Store(max(last.Load(), now))
		return service, nil
	}
	var evicted []string
	if len(s.seen) >= s.max && s.ttl > 0 && s.max > 0 && now >= s.nextExpiry {
		cutoff := now - int64(s.ttl)
		next := int64(1<<63 - 1)
		for name, last := range s.seen {
			if l := last.Load(); l <= cutoff {
				delete(s.seen, name)
				evicted = append(evicted, name)
			} else {
				next = min(next, l+int64(s.ttl))
			}
		}
		s.nextExpiry = next
	}
	if len(s.seen) >= s.max {
		return Other, evicted
	}
	last := new(atomic.Int64)
	last.Store(now)
	s.seen[service] = last
	if s.ttl > 0 {
		s.nextExpiry = min(s.nextExpiry, now+int64(s.ttl))
	}
	return service, evicted
}
