package assemble

import (
	"slices"

	"github.com/ragwatch/ragwatch/collector/facts"
	"github.com/ragwatch/ragwatch/collector/span"
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
	// UpstreamP is the sampling probability the trace's tracestate declares (its root's, else
	// the first span's that declares one): 0 when none does, -1 when that declaration is
	// malformed. Records carry it as UpstreamProbability when it is positive.
	UpstreamP float64
}

// Options are what assembly reads from the configuration.
type Options struct {
	// RetrievalTools are conventions.retrieval_tools: the names of the AI SDK tools whose
	// calls are retrievals whatever their result's shape (docs/conventions.md).
	RetrievalTools []string
}

// Assemble turns the spans of one trace into records, with the default Options. It is pure:
// no clock, no metrics. Spans of other traces must not be mixed in. Duplicate span ids keep
// the first span.
func Assemble(spans []span.Span) Result {
	return AssembleWith(spans, nil)
}

// AssembleWith is Assemble with opts (nil: the defaults).
func AssembleWith(spans []span.Span, opts *Options) Result {
	if len(spans) == 0 {
		return Result{}
	}
	sc := getScratch(len(spans))
	t := &sc.tree
	*t = buildTree(spans, sc, opts)
	defer sc.release(len(t.nodes))

	rets, gens := sc.rets[:0], sc.gens[:0]
	for i := 0; i < t.n; i++ {
		if t.nodes[i].f.Retrieval {
			rets = append(rets, i)
		}
		if t.nodes[i].f.Generation {
			gens = append(gens, i)
		}
	}
	if len(rets) == 0 && len(gens) > 0 {
		// No retrieval span: a step whose input or output holds documents (LangChain's
		// {"context": [Document, ...]} in OpenLLMetry's traceloop.entity.output) stands for
		// the retrieval. Only traces without one pay for reading those values as JSON.
		for i := 0; i < t.n; i++ {
			if facts.MarkStepRetrieval(t.nodes[i].f) {
				rets = append(rets, i)
			}
		}
	}
	sc.rets, sc.gens = rets, gens // kept grown for the next trace
	res := Result{RAG: len(rets) > 0 || len(gens) > 0, UpstreamP: upstreamP(spans)}
	byStart := func(a, b int) int { return t.nodes[a].start.Compare(t.nodes[b].start) }
	slices.SortStableFunc(rets, byStart)
	slices.SortStableFunc(gens, byStart)

	turns := t.findTurns(rets, gens, sc.turns[:0])
	if cap(turns) > cap(sc.turns) {
		sc.turns = turns[:0] // grown: kept for the next trace
	}
	slices.SortStableFunc(turns, byStart)

	if len(turns) == 0 {
		res.Feedback = t.orphanFeedback(spans[0].TraceID)
		return res
	}
	b := builder{t: t, tid: spans[0].TraceID, attrs: sc.attrs,
		elided: slices.ContainsFunc(spans, func(s span.Span) bool { return s.Elided })}
	b.assignMembers(turns, sc)
	fb := b.feedbackByTurn(turns)
	for i, turn := range turns {
		r := b.build(turn, b.mem[i])
		if fb != nil {
			r.Feedback = fb[i]
		}
		if res.UpstreamP > 0 {
			r.UpstreamProbability = res.UpstreamP
		}
		res.Records = append(res.Records, r)
	}
	return res
}

// upstreamP picks the trace's declared upstream sampling probability: the true root's when it
// declares one (head samplers set it there, and children inherit it), else the first span's.
func upstreamP(spans []span.Span) float64 {
	var first float64
	for i := range spans {
		s := &spans[i]
		if s.UpstreamP == 0 {
			continue
		}
		if s.ParentSpanID.IsEmpty() {
			return s.UpstreamP
		}
		if first == 0 {
			first = s.UpstreamP
		}
	}
	return first
}
