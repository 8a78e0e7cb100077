package cardinality

import "time"

// VariantSet bounds the `variant` label the way ServiceSet bounds `service`: up to max
// distinct variants keep their name, later ones are Other, and with a TTL a variant not seen
// for that long gives its slot up (a finished canary does not hold a slot forever). A record
// without variant keeps the empty value, which Prometheus treats as an absent label: such
// series are selected by `variant=""`. A nil *VariantSet labels everything "".
type VariantSet struct {
	set *ServiceSet
}

// NewVariantSet returns a set admitting at most max variants (variants.max_values), aging
// out after ttl without being seen (0: never); now is the clock, nil for time.Now.
func NewVariantSet(max int, ttl time.Duration, now func() time.Time) *VariantSet {
	return &VariantSet{set: NewServiceSetTTL(max, ttl, now)}
}

// Label returns the label value for variant and whether the cap replaced it by Other.
func (v *VariantSet) Label(variant string) (label string, capped bool) {
	if v == nil || variant == "" {
		return "", false
	}
	l := v.set.Label(variant)
	return l, l == Other && variant != Other
}

// LabelAt is Label with the set's clock read by the caller (ServiceSet.LabelAt).
func (v *VariantSet) LabelAt(variant string, now time.Time) (label string, capped bool) {
	if v == nil || variant == "" {
		return "", false
	}
	l := v.set.LabelAt(variant, now)
	return l, l == Other && variant != Other
}

// OnEvict registers f to be called with each variant that ages out (ServiceSet.OnEvict).
func (v *VariantSet) OnEvict(f func(variant string)) {
	if v != nil {
		v.set.OnEvict(f)
	}
}
