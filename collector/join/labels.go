package join

import (
	"maps"

	"github.com/ragwatch/ragwatch/internal/record"
)

// mergeLabels merges labels that waited for their record (in arrival order) onto the record's
// own labels, if any, into a new Label: later values per metric win, relevance maps merge
// (later grades per document win), the last non-empty reference and labeler win, and the time
// is the latest. The ids are left empty: on a record, the record says whose labels they are.
func mergeLabels(base *record.Label, ps []pending) *record.Label {
	out := &record.Label{}
	add := func(l *record.Label) {
		if len(l.Values) > 0 {
			if out.Values == nil {
				out.Values = make(map[string]float64, len(l.Values))
			}
			maps.Copy(out.Values, l.Values)
		}
		if len(l.Relevance) > 0 {
			if out.Relevance == nil {
				out.Relevance = make(map[string]int, len(l.Relevance))
			}
			maps.Copy(out.Relevance, l.Relevance)
		}
		if l.Reference != "" {
			out.Reference = l.Reference
		}
		if l.Labeler != "" {
			out.Labeler = l.Labeler
		}
		if l.Time.After(out.Time) {
			out.Time = l.Time
		}
	}
	if base != nil {
		add(base)
	}
	for _, p := range ps {
		if p.Label != nil {
			add(p.Label)
		}
	}
	return out
}
