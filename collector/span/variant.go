package span

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// A record's variant (docs/variants.md) is read while a span is decoded, because the keys it
// comes from (a user's own span or resource attribute, a feature-flag event) are not among the
// attributes a held span keeps. Each span keeps only the best variant it carries and that
// variant's rank; the builder takes the best rank over the turn's spans.

// VariantKey is the span attribute that names a record's variant above every configured key.
const VariantKey = "rag.variant"

// Feature-flag evaluation events of the OpenTelemetry feature-flag conventions: the current
// name, and the name of the conventions before 1.32. Their attributes are read like span
// attributes (feature_flag.result.variant, feature_flag.variant, ...).
const (
	featureFlagEvent       = "feature_flag.evaluation"
	legacyFeatureFlagEvent = "feature_flag"
)

// DefaultVariantAttributes are variants.attributes' default.
var DefaultVariantAttributes = []string{"feature_flag.result.variant", "service.version"}

// VariantKeys are the keys a variant is read from, best first: rag.variant, then the
// configured attributes in order. A span's VariantRank is its key's index + 1.
type VariantKeys []string

func NewVariantKeys(attrs []string) VariantKeys {
	keys := make(VariantKeys, 0, len(attrs)+1)
	keys = append(keys, VariantKey)
	for _, a := range attrs {
		if a != "" && a != VariantKey {
			keys = append(keys, a)
		}
	}
	return keys
}

var defaultVariantKeys = NewVariantKeys(DefaultVariantAttributes)

// read returns the best variant among the span's attributes, its feature-flag events and its
// resource's attributes (in that order for one key), with its rank (0: none).
func (keys VariantKeys) read(ps ptrace.Span, resource pcommon.Map) (string, uint8) {
	for i, k := range keys {
		if i >= 255 {
			break
		}
		if v, ok := variantValue(ps.Attributes(), k); ok {
			return v, uint8(i + 1)
		}
		evs := ps.Events()
		for j := 0; j < evs.Len(); j++ {
			ev := evs.At(j)
			if n := ev.Name(); n != featureFlagEvent && n != legacyFeatureFlagEvent {
				continue
			}
			if v, ok := variantValue(ev.Attributes(), k); ok {
				return v, uint8(i + 1)
			}
		}
		if v, ok := variantValue(resource, k); ok {
			return v, uint8(i + 1)
		}
	}
	return "", 0
}

// variantValue reads k as a variant: a non-empty string, number or bool, trimmed and cut to
// record.MaxVariantLength, copied so that the held span does not keep the request alive.
func variantValue(m pcommon.Map, k string) (string, bool) {
	if m.Len() == 0 {
		return "", false
	}
	v, ok := m.Get(k)
	if !ok {
		return "", false
	}
	switch v.Type() {
	case pcommon.ValueTypeStr, pcommon.ValueTypeInt, pcommon.ValueTypeDouble, pcommon.ValueTypeBool:
	default:
		return "", false
	}
	s := strings.TrimSpace(v.AsString())
	if s == "" {
		return "", false
	}
	return strings.Clone(truncate.String(s, record.MaxVariantLength)), true
}
