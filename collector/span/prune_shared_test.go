package span_test

import (
	"reflect"
	"testing"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/collector/span/spantest"
)

// TestPruneSharedKeys checks that pruneSpanAttrs keeps the same attributes of a span whether
// its keys are shared (known by their address) or not (read by their text).
func TestPruneSharedKeys(t *testing.T) {
	pruned := 0
	for n, s := range spantest.SharedKeySpans() {
		shared, text := spantest.BothSpellings(t, s)
		var msgs []span.Message
		a := span.PruneSpanAttrs(shared.Attrs, &shared, &msgs)
		b := span.PruneSpanAttrs(text.Attrs, &text, &msgs)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("span %d (%s): kept by address\n%+v\nby text\n%+v", n, s.Name, a, b)
		}
		if len(a) < len(s.Attrs) {
			pruned++
		}
	}
	if pruned < 10 {
		t.Errorf("%d spans pruned: the spans do not exercise pruning", pruned)
	}
}
