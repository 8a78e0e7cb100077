// Package ring keeps time-bucketed state in a fixed number of slots, so a sliding window costs
// the same memory whatever the traffic.
package ring

import "time"

// Slot is one time bucket: Idx is the bucket number (unix time / width), V its value.
type Slot[T any] struct {
	Idx int64 `json:"i"`
	V   T     `json:"v"`
}

// Ring holds the last len(Slots) buckets of Width each. The zero Idx marks an unused slot.
// Exported fields are the persisted form. Not safe for concurrent use.
type Ring[T any] struct {
	Width time.Duration `json:"width"`
	Slots []Slot[T]     `json:"slots"`
}

// New returns a ring of buckets of width covering at least span (plus the current bucket).
func New[T any](width, span time.Duration) *Ring[T] {
	if width <= 0 {
		width = time.Second
	}
	n := int((span+width-1)/width) + 1
	return &Ring[T]{Width: width, Slots: make([]Slot[T], n)}
}

// Index is t's bucket number.
func (r *Ring[T]) Index(t time.Time) int64 { return t.UnixNano() / int64(r.Width) }

func (r *Ring[T]) slot(idx int64) *Slot[T] {
	i := idx % int64(len(r.Slots))
	if i < 0 {
		i += int64(len(r.Slots))
	}
	return &r.Slots[i]
}

// At returns the bucket for t, reset first when its slot held an older bucket. It returns nil
// for a time too old to still be held.
func (r *Ring[T]) At(t time.Time) *T {
	idx := r.Index(t)
	s := r.slot(idx)
	if s.Idx == idx {
		return &s.V
	}
	if s.Idx > idx {
		return nil
	}
	var zero T
	s.Idx, s.V = idx, zero
	return &s.V
}

// Buckets returns how many buckets a window spans: ceil(window/width).
func (r *Ring[T]) Buckets(window time.Duration) int64 {
	return int64((window + r.Width - 1) / r.Width)
}

// Window calls fn for each held bucket among the last ceil(window/width) buckets up to and
// including now's.
func (r *Ring[T]) Window(now time.Time, window time.Duration, fn func(*T)) {
	hi := r.Index(now)
	r.Range(hi-r.Buckets(window)+1, hi, fn)
}

// Range calls fn for each held bucket with lo <= index <= hi, oldest first.
func (r *Ring[T]) Range(lo, hi int64, fn func(*T)) {
	if n := int64(len(r.Slots)); hi-lo+1 > n {
		lo = hi - n + 1
	}
	for idx := lo; idx <= hi; idx++ {
		if s := r.slot(idx); s.Idx == idx && idx != 0 {
			fn(&s.V)
		}
	}
}

// Compatible reports whether a restored ring has the shape this one expects.
func (r *Ring[T]) Compatible(o *Ring[T]) bool {
	return o != nil && o.Width == r.Width && len(o.Slots) == len(r.Slots)
}
