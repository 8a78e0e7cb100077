package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
)

// TestRetrievalNotSeenStaysOutOfSLOs: an SLO on empty_retrieval_rate does not count records
// whose trace showed no retrieval (issue 52: five chat records of a LangChain.js app paged as
// empty retrievals); the same records without the mark do.
func TestRetrievalNotSeenStaysOutOfSLOs(t *testing.T) {
	h := newHarness(t, `
slos:
  - {name: empty, metric: empty_retrieval_rate, objective: 0.05, alert_above: 0.2, window: 10m, min_samples: 10}
drift: {detectors: []}
`, nil)
	feed := func(notSeen bool, prefix string) {
		for i := range 40 {
			r := &record.Record{TraceID: fmt.Sprintf("%s-%d", prefix, i), Service: "search", Answer: "Within 14 days [1].", RetrievalNotSeen: notSeen}
			if err := h.e.ConsumeRecord(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			h.clk.Add(time.Second)
		}
		h.e.Evaluate(context.Background())
	}
	feed(true, "chat")
	if p := h.phase("empty", "search", "page"); p != "none" {
		t.Fatalf("after 40 records whose retrieval was not seen: phase %q, want none (no sample)", p)
	}
	feed(false, "empty")
	if p := h.phase("empty", "search", "page"); p == "none" {
		t.Fatalf("after 40 empty retrievals: phase %q, want the SLO to see them", p)
	}
}
