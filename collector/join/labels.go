package join

import (
	"github.com/ragwatch/ragwatch/internal/record"
)

// mergeLabels merges labels that waited for their record (in arrival order) onto the record's
// own labels, if any (record.MergeLabels).
func mergeLabels(base *record.Label, ps []pending) *record.Label {
	more := make([]*record.Label, 0, len(ps))
	for _, p := range ps {
		if p.Label != nil {
			more = append(more, p.Label)
		}
	}
	return record.MergeLabels(base, more...)
}
