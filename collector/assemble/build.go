package assemble

import (
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ragwatch/ragwatch/collector/facts"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/hexid"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// builder builds the record of one turn.
type builder struct {
	mem    [][]int // the spans of each turn (assignMembers)
	owner  []int   // per node: its turn's index + 1, or -1 (assignMembers)
	t      *tree
	tid    pcommon.TraceID
	elided bool // a trace's records share its spans: any may hold an elided text
	attrs  *attrMaps
}

// topLevel reports whether i has no ancestor below turn for which is(ancestor) holds.
func (b *builder) topLevel(i, turn int, is func(*facts.Facts) bool) bool {
	for j := b.t.nodes[i].parent; j >= 0 && j != turn && b.t.nodes[j].depth > b.t.nodes[turn].depth; j = b.t.nodes[j].parent {
		if f := b.t.nodes[j].f; f != nil && is(f) {
			return false
		}
	}
	return true
}

func isRetrieval(f *facts.Facts) bool  { return f.Retrieval }
func isGeneration(f *facts.Facts) bool { return f.Generation }

func (b *builder) build(turn int, mem []int) *record.Record {
	t := b.t
	tn := &t.nodes[turn]
	r := &record.Record{Time: tn.start, Elided: b.elided}
	if !tn.id.IsEmpty() {
		r.TraceID, r.SpanID = hexid.TraceSpan(b.tid, tn.id)
	} else {
		r.TraceID = b.tid.String()
	}
	if tn.span != nil {
		r.Service = tn.span.Service
	}
	for _, i := range mem {
		if r.Service != "" {
			break
		}
		r.Service = t.nodes[i].span.Service
	}
	if tn.span == nil && len(mem) > 0 {
		// A virtual turn (its span never arrived): time it by what did arrive.
		r.Time = t.nodes[mem[0]].start
	}

	turnBoth := tn.f != nil && tn.f.Retrieval && tn.f.Generation
	var rets, gens, leafGens []int
	for _, i := range mem {
		f := t.nodes[i].f
		if f.Retrieval && !(turnBoth && i == turn) {
			rets = append(rets, i)
		}
		if f.Generation && !(turnBoth && i == turn) {
			gens = append(gens, i)
		}
	}
	for _, g := range gens {
		leaf := true
		for _, h := range gens {
			if h != g && t.within(h, g) {
				leaf = false
				break
			}
		}
		if leaf {
			leafGens = append(leafGens, g)
		}
	}

	// Latency.
	for _, i := range rets {
		// A step holding documents (facts.MarkStepRetrieval) was timed as a step, not as a
		// search: its duration is no retrieval latency.
		if !t.nodes[i].f.Step && b.topLevel(i, turn, isRetrieval) {
			r.Latency.Retrieval += durMS(t.nodes[i].start, t.nodes[i].end)
		}
	}
	for _, i := range gens {
		if b.topLevel(i, turn, isGeneration) {
			r.Latency.Generation += durMS(t.nodes[i].start, t.nodes[i].end)
		}
	}
	if tn.span != nil {
		r.Latency.Total = durMS(tn.start, tn.end)
	} else if len(mem) > 0 {
		end := t.nodes[mem[0]].end
		for _, i := range mem {
			end = maxTime(end, t.nodes[i].end)
		}
		r.Latency.Total = durMS(r.Time, end)
	}

	// Documents: rag.documents, else the last reranker's output, else the top-level retrievals.
	ragSpan := b.pick(turn, mem, func(f *facts.Facts) bool { return f.RAGDocs.Type != span.TypeEmpty })
	switch {
	case ragSpan >= 0:
		r.Documents = facts.DocsFromAny(t.nodes[ragSpan].f.RAGDocs.Structured())
	default:
		rr := -1
		for _, i := range rets {
			if t.nodes[i].f.RerankDocs != nil && (rr < 0 || !t.nodes[i].end.Before(t.nodes[rr].end)) {
				rr = i
			}
		}
		if rr >= 0 {
			r.Documents = facts.CompactDocs(t.nodes[rr].f.RerankDocs)
		} else {
			for _, i := range rets {
				if b.topLevel(i, turn, isRetrieval) {
					r.Documents = facts.AppendDocs(r.Documents, b.retrievalDocs(i, rets))
				}
			}
		}
	}
	r.Documents = facts.FinishDocs(r.Documents)
	// No retrieval in the turn, not even a step holding documents: the trace does not show
	// one. Its record is not an empty retrieval (docs/record.md).
	r.RetrievalNotSeen = ragSpan < 0 && len(rets) == 0 && !(tn.f != nil && tn.f.Retrieval)

	// The answering generation: the last-ending leaf generation that has text.
	answerGen := -1
	sortByEnd(t, leafGens)
	for k := len(leafGens) - 1; k >= 0; k-- {
		if a := facts.AnswerOf(t.nodes[leafGens[k]].f); a != "" {
			answerGen = leafGens[k]
			r.Answer = a
			break
		}
	}
	if answerGen < 0 && len(leafGens) > 0 {
		answerGen = leafGens[len(leafGens)-1]
	}
	if s := b.pick(turn, mem, func(f *facts.Facts) bool { return f.RAGAnswer != "" }); s >= 0 {
		r.Answer = t.nodes[s].f.RAGAnswer
	} else if r.Answer == "" && tn.f != nil {
		r.Answer = facts.AnswerOf(tn.f)
	}

	// Query.
	if s := b.pick(turn, mem, func(f *facts.Facts) bool { return f.RAGQuery != "" }); s >= 0 {
		r.Query = t.nodes[s].f.RAGQuery
	}
	if r.Query == "" && tn.f != nil && !tn.f.Retrieval && !tn.f.Generation {
		r.Query = facts.InputText(tn.f)
	}
	for _, i := range rets {
		if r.Query != "" {
			break
		}
		r.Query = facts.RetrievalQuery(t.nodes[i].f)
	}
	if r.Query == "" && answerGen >= 0 {
		r.Query = facts.LastUserText(t.nodes[answerGen].f)
	}
	if answerGen >= 0 {
		r.History, r.Turn = facts.HistoryOf(t.nodes[answerGen].f)
	}

	if r.Answer == "" && answerGen >= 0 && !t.nodes[answerGen].id.IsEmpty() {
		r.AnswerSpanID = t.nodes[answerGen].id.String() // a late answer names it (record.Content)
	}

	// Model, response id and usage.
	if answerGen >= 0 {
		f := t.nodes[answerGen].f
		r.Model = facts.ModelOf(f)
		if len(f.ResponseID) <= record.MaxIDLength { // a longer one is not an id: left out, not cut
			r.ResponseID = f.ResponseID
		}
	}
	for k := len(gens) - 1; k >= 0 && r.Model == ""; k-- {
		r.Model = facts.ModelOf(t.nodes[gens[k]].f)
	}
	for _, g := range gens {
		f := t.nodes[g].f
		if !f.HasIn && !f.HasOut {
			continue
		}
		counted := false // a descendant generation with usage already counts this call
		for _, h := range gens {
			if h != g && t.within(h, g) && (t.nodes[h].f.HasIn || t.nodes[h].f.HasOut) {
				counted = true
				break
			}
		}
		if !counted {
			r.Usage.InputTokens += f.InTokens
			r.Usage.OutputTokens += f.OutTokens
		}
	}

	// Context: the turn span and its ancestors first, then the turn's spans in start order.
	var ctxBuf [16]int
	ctx := b.contextOrder(turn, mem, ctxBuf[:0])
	for _, i := range ctx {
		f := t.nodes[i].f
		if r.SessionID == "" {
			r.SessionID = f.Session
		}
		if r.UserID == "" {
			r.UserID = f.User
		}
	}
	route, source, workflow := "", "", ""
	for _, i := range ctx {
		f := t.nodes[i].f
		if route == "" {
			route = f.Route
		}
		if source == "" {
			source = f.DataSource
		}
		if workflow == "" {
			workflow = f.Workflow
		}
	}
	for _, i := range ctx {
		if route != "" {
			break
		}
		route = t.nodes[i].f.MetadataRoute
	}
	r.Variant = b.variantOf(ctx)
	r.Attributes = b.attrs.get(route, source, workflow)

	// ragwatch's explicit keys.
	if s := b.pick(turn, mem, func(f *facts.Facts) bool { return f.RAGReference != "" }); s >= 0 {
		r.Reference = t.nodes[s].f.RAGReference
	}
	if s := b.pick(turn, mem, func(f *facts.Facts) bool { return f.RAGRelevance.Type != span.TypeEmpty }); s >= 0 {
		r.Relevance = facts.RelevanceFrom(t.nodes[s].f.RAGRelevance)
	}
	if s := b.pick(turn, mem, func(f *facts.Facts) bool { return f.RAGCitations.Type != span.TypeEmpty }); s >= 0 {
		r.Citations = facts.CitationsFrom(t.nodes[s].f.RAGCitations)
	}

	r.Query = truncate.String(r.Query, record.MaxTextBytes)
	r.Answer = truncate.String(r.Answer, record.MaxTextBytes)
	r.Reference = truncate.String(r.Reference, record.MaxTextBytes)
	r.SessionID = truncate.String(r.SessionID, record.MaxIDLength)
	r.UserID = truncate.String(r.UserID, record.MaxIDLength)
	r.Normalize(r.Time)
	return r
}

// pick returns the span holding a field: the turn span if it has it, else the last span of the
// turn (in start order) that has it; -1 when none.
func (b *builder) pick(turn int, mem []int, has func(*facts.Facts) bool) int {
	if f := b.t.nodes[turn].f; f != nil && has(f) {
		return turn
	}
	for k := len(mem) - 1; k >= 0; k-- {
		if has(b.t.nodes[mem[k]].f) {
			return mem[k]
		}
	}
	return -1
}

// contextOrder lists the turn span, its real ancestors (innermost first), then its spans.
// It appends to out.
func (b *builder) contextOrder(turn int, mem []int, out []int) []int {
	for j := turn; j >= 0 && j != b.t.root; j = b.t.nodes[j].parent {
		if b.t.nodes[j].f != nil {
			out = append(out, j)
		}
	}
	for _, i := range mem {
		if i != turn {
			out = append(out, i)
		}
	}
	return out
}

// sortByEnd sorts the node indices xs by end time, keeping the order of equal ends. A turn has
// a few generations, sorted in place by insertion: handed to slices.SortStableFunc, a list
// built on the stack (leafGens) is moved to the heap first, one allocation a record. A long
// list is sorted as a copy, so that xs still does not escape.
func sortByEnd(t *tree, xs []int) {
	if len(xs) > smallTrace {
		ys := slices.Clone(xs)
		slices.SortStableFunc(ys, func(x, y int) int { return t.nodes[x].end.Compare(t.nodes[y].end) })
		copy(xs, ys)
		return
	}
	for k := 1; k < len(xs); k++ {
		for m := k; m > 0 && t.nodes[xs[m]].end.Before(t.nodes[xs[m-1]].end); m-- {
			xs[m], xs[m-1] = xs[m-1], xs[m]
		}
	}
}

// maxAttrValue bounds a record attribute's value, in bytes.
const maxAttrValue = 256

// attrMaps hands records with the same route, data source and workflow one shared attributes
// map: a map was the largest allocation of a record after the record itself (≈ 300 bytes),
// and these attributes are of low cardinality by design. Nothing changes a record's
// attributes in place (the export copies them to redact). The cache is direct-mapped, a
// tuple takes the slot of its hash, and a slot holds copies of its strings, so that no
// request's buffer stays reachable through it. A nil *attrMaps shares nothing.
type attrMaps struct {
	seed  maphash.Seed
	slots [64]attrMap
}

type attrMap struct {
	route, source, workflow string
	m                       map[string]string
}

func newAttrMaps() *attrMaps { return &attrMaps{seed: maphash.MakeSeed()} }

// get returns the attributes of a record with this route, data source and workflow (each
// cut to maxAttrValue; empty ones are left out): nil when all are empty.
func (c *attrMaps) get(route, source, workflow string) map[string]string {
	route = truncate.String(route, maxAttrValue)
	source = truncate.String(source, maxAttrValue)
	workflow = truncate.String(workflow, maxAttrValue)
	if route == "" && source == "" && workflow == "" {
		return nil
	}
	var s *attrMap
	if c != nil {
		h := maphash.String(c.seed, route) + 31*maphash.String(c.seed, source) + 961*maphash.String(c.seed, workflow)
		s = &c.slots[h%uint64(len(c.slots))]
		if s.m != nil && s.route == route && s.source == source && s.workflow == workflow {
			return s.m
		}
		route, source, workflow = strings.Clone(route), strings.Clone(source), strings.Clone(workflow)
	}
	m := make(map[string]string, 3)
	for _, kv := range [...][2]string{{"route", route}, {"data_source", source}, {"workflow", workflow}} {
		if kv[1] != "" {
			m[kv[0]] = kv[1]
		}
	}
	if s != nil {
		*s = attrMap{route: route, source: source, workflow: workflow, m: m}
	}
	return m
}

func durMS(start, end time.Time) float64 {
	if start.IsZero() || end.IsZero() || end.Before(start) {
		return 0
	}
	return math.Round(float64(end.Sub(start))/1e3) / 1e3
}

// retrievalDocs returns the documents a retrieval span gives; when it names none itself, those
// of the retrievals nested directly under it.
func (b *builder) retrievalDocs(i int, rets []int) []record.Document {
	if docs, ok := facts.OwnDocs(b.t.nodes[i].f); ok {
		return docs
	}
	var out []record.Document
	for _, j := range rets {
		if j != i && b.t.within(j, i) && b.topLevel(j, i, isRetrieval) {
			out = facts.AppendDocs(out, b.retrievalDocs(j, rets))
		}
	}
	return out
}
