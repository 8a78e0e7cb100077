package assemble

import (
	"slices"

	"github.com/ragwatch/ragwatch/internal/record"
)

// Result is what one trace gives.
type Result struct {
	// Records holds one record per turn, in turn start order.
	Records []*record.Record
	// Feedback holds feedback found in a trace that holds no turn, with TraceID (the linked
	// trace when the feedback span links to one), Service and Time set.
	Feedback []record.Feedback
	// RAG is false when the trace has no retrieval and no generation at all (outcome not_rag).
	RAG bool
}

// Assemble turns the spans of one trace into records. It is pure: no clock, no metrics. Spans of
// other traces must not be mixed in. Duplicate span ids keep the first span.
func Assemble(spans []Span) Result {
	if len(spans) == 0 {
		return Result{}
	}
	sc := getScratch(len(spans))
	t := buildTree(spans, sc)
	defer sc.release(len(t.nodes))

	var rets, gens []int
	for i := 0; i < t.n; i++ {
		if t.nodes[i].f.retrieval {
			rets = append(rets, i)
		}
		if t.nodes[i].f.generation {
			gens = append(gens, i)
		}
	}
	res := Result{RAG: len(rets) > 0 || len(gens) > 0}
	byStart := func(a, b int) int { return t.nodes[a].start.Compare(t.nodes[b].start) }
	slices.SortStableFunc(rets, byStart)
	slices.SortStableFunc(gens, byStart)

	turns := t.findTurns(rets, gens)
	slices.SortStableFunc(turns, byStart)

	if len(turns) == 0 {
		res.Feedback = t.orphanFeedback(spans[0].TraceID)
		return res
	}
	b := builder{t: &t, multi: len(turns) > 1, traceID: spans[0].TraceID.String()}
	b.assignMembers(turns)
	fb := b.feedbackByTurn(turns)
	for i, turn := range turns {
		r := b.build(turn, b.mem[i])
		if fb != nil {
			r.Feedback = fb[i]
		}
		res.Records = append(res.Records, r)
	}
	return res
}
