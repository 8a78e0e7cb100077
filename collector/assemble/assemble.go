package assemble

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/truncate"
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

// node is one span of the trace tree, or a virtual node: the parent a span names but that never
// arrived, or the super root above every root.
type node struct {
	parent     int
	depth      int
	start, end time.Time
	span       *Span  // nil for virtual nodes
	f          *facts // nil for virtual nodes
	id         pcommon.SpanID
}

type tree struct {
	tin, tout []int // DFS numbering, for large trees only (numberNodes)
	nodes     []node
	n         int // real spans are nodes[:n]
	root      int // the super root
	facts     []facts
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

func buildTree(spans []Span, sc *scratch) tree {
	n := len(spans)
	t := tree{n: n, facts: sc.facts[:n]}
	t.nodes = sc.nodes[:n]
	idx := newSpanIndex(n)
	if idx.big == nil {
		if cap(sc.ids) < smallTrace {
			sc.ids, sc.at = make([]pcommon.SpanID, 0, smallTrace), make([]int, 0, smallTrace)
		}
		idx.ids, idx.at = sc.ids[:0], sc.at[:0] // ids need no clearing: no pointers
	}
	for i := range spans {
		s := &spans[i]
		t.nodes[i] = node{start: s.Start, end: s.End, span: s, f: &t.facts[i], id: s.SpanID, parent: -1}
		if _, dup := idx.get(s.SpanID); dup {
			t.facts[i].feedbackRank = rankNone // a redelivered copy says nothing new
			continue
		}
		readFacts(&t.facts[i], s)
		idx.put(s.SpanID, i)
	}
	missing := newSpanIndex(0)
	var roots []int
	for i := range spans {
		p := spans[i].ParentSpanID
		if p.IsEmpty() || p == spans[i].SpanID {
			roots = append(roots, i)
			continue
		}
		if j, ok := idx.get(p); ok {
			t.nodes[i].parent = j
			continue
		}
		v, ok := missing.get(p)
		if !ok {
			v = len(t.nodes)
			missing.put(p, v)
			t.nodes = append(t.nodes, node{id: p, start: spans[i].Start, end: spans[i].End, parent: -1})
			roots = append(roots, v)
		}
		t.nodes[i].parent = v
		t.nodes[v].start = minTime(t.nodes[v].start, spans[i].Start)
		t.nodes[v].end = maxTime(t.nodes[v].end, spans[i].End)
	}
	t.root = len(t.nodes)
	t.nodes = append(t.nodes, node{parent: -1})
	for _, r := range roots {
		t.nodes[r].parent = t.root
	}
	t.computeDepths()
	if len(t.nodes) > eulerMin {
		t.numberNodes()
	}
	return t
}

// eulerMin is the tree size from which ancestry checks use DFS numbering instead of walking up
// (a deep chain of spans would make every walk long).
const eulerMin = 64

// numberNodes gives each node its DFS entry and exit numbers: i is within anc exactly when
// anc's interval holds i's.
func (t *tree) numberNodes() {
	k := len(t.nodes)
	first := make([]int, k+1) // children of p are kids[first[p]:first[p+1]]
	for i := range t.nodes {
		if p := t.nodes[i].parent; p >= 0 {
			first[p+1]++
		}
	}
	for p := 1; p <= k; p++ {
		first[p] += first[p-1]
	}
	kids := make([]int, k)
	fill := append([]int(nil), first[:k]...)
	for i := range t.nodes {
		if p := t.nodes[i].parent; p >= 0 {
			kids[fill[p]] = i
			fill[p]++
		}
	}
	t.tin, t.tout = make([]int, k), make([]int, k)
	clock := 0
	type frame struct{ node, next int }
	stack := []frame{{t.root, first[t.root]}}
	t.tin[t.root] = clock
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.next < first[top.node+1] {
			c := kids[top.next]
			top.next++
			clock++
			t.tin[c] = clock
			stack = append(stack, frame{c, first[c]})
			continue
		}
		t.tout[top.node] = clock
		stack = stack[:len(stack)-1]
	}
}

// scratch is the per-trace working memory of Assemble (facts and tree nodes), pooled: it is the
// largest allocation of assembly and nothing of it outlives the call (records copy what they
// keep).
type scratch struct {
	facts []facts
	nodes []node
	ids   []pcommon.SpanID // the span index of a small trace
	at    []int
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledSpans keeps a huge trace's scratch out of the pool.
const maxPooledSpans = 256

func getScratch(n int) *scratch {
	if n > maxPooledSpans {
		return &scratch{facts: make([]facts, n), nodes: make([]node, n, 2*n+1)}
	}
	sc := scratchPool.Get().(*scratch)
	if cap(sc.facts) < n {
		sc.facts = make([]facts, n, max(n, 8))
		sc.nodes = make([]node, n, 2*max(n, 8)+1)
	}
	sc.facts = sc.facts[:n] // release clears what is used
	return sc
}

// release clears what the scratch points at (spans, documents) and returns it to the pool.
// Only what this use wrote is cleared (facts of its spans, its nodes up to the capacity): the
// rest is still zero from earlier releases.
func (sc *scratch) release(nodes int) {
	if cap(sc.facts) > maxPooledSpans {
		return
	}
	clear(sc.facts)
	clear(sc.nodes[:min(nodes, cap(sc.nodes))])
	scratchPool.Put(sc)
}

// spanIndex maps span ids to node indices: a slice scan for the usual small trace, a map beyond.
type spanIndex struct {
	ids []pcommon.SpanID
	at  []int
	big map[pcommon.SpanID]int
}

const smallTrace = 32

// newSpanIndex returns an index for n spans; below smallTrace its slices are left to the caller
// (nil grows on put).
func newSpanIndex(n int) spanIndex {
	if n > smallTrace {
		return spanIndex{big: make(map[pcommon.SpanID]int, n)}
	}
	return spanIndex{}
}

func (x *spanIndex) get(id pcommon.SpanID) (int, bool) {
	if x.big != nil {
		i, ok := x.big[id]
		return i, ok
	}
	for k := range x.ids {
		if x.ids[k] == id {
			return x.at[k], true
		}
	}
	return 0, false
}

func (x *spanIndex) put(id pcommon.SpanID, i int) {
	if x.big == nil && len(x.ids) >= smallTrace {
		x.big = make(map[pcommon.SpanID]int, 2*smallTrace)
		for k := range x.ids {
			x.big[x.ids[k]] = x.at[k]
		}
	}
	if x.big != nil {
		x.big[id] = i
		return
	}
	x.ids = append(x.ids, id)
	x.at = append(x.at, i)
}

// computeDepths sets each node's depth, breaking parent cycles (which hostile input can build) by
// hanging the node where the cycle closes under the super root.
func (t *tree) computeDepths() {
	known := make([]bool, len(t.nodes))
	onPath := make([]bool, len(t.nodes))
	known[t.root] = true
	var path []int
	for i := range t.nodes {
		for !known[i] {
			path = path[:0]
			cut := false
			for j := i; !known[j]; j = t.nodes[j].parent {
				if onPath[j] || t.nodes[j].parent < 0 {
					t.nodes[j].parent = t.root // cut the cycle here, then walk again
					cut = true
					break
				}
				onPath[j] = true
				path = append(path, j)
			}
			for _, p := range path {
				onPath[p] = false
			}
			if cut {
				continue
			}
			for k := len(path) - 1; k >= 0; k-- {
				p := path[k]
				t.nodes[p].depth = t.nodes[t.nodes[p].parent].depth + 1
				known[p] = true
			}
		}
	}
}

func (t *tree) lca(a, b int) int {
	for t.nodes[a].depth > t.nodes[b].depth {
		a = t.nodes[a].parent
	}
	for t.nodes[b].depth > t.nodes[a].depth {
		b = t.nodes[b].parent
	}
	for a != b {
		a, b = t.nodes[a].parent, t.nodes[b].parent
	}
	return a
}

// within reports whether node i is anc or one of its descendants.
func (t *tree) within(i, anc int) bool {
	if t.tin != nil {
		return t.tin[anc] <= t.tin[i] && t.tout[i] <= t.tout[anc]
	}
	for t.nodes[i].depth > t.nodes[anc].depth {
		i = t.nodes[i].parent
	}
	return i == anc
}

// findTurns applies the turn rule: each generation is paired with the latest retrieval that
// started no later than it; the pair's turn is the innermost span containing both. Turns that
// contain another turn are dropped (they are the conversation or agent around the turns). With no
// pair at all, a trace that has a retrieval or a generation gives one turn: the innermost span
// containing all of them.
func (t *tree) findTurns(rets, gens []int) []int {
	var turns []int
	var seen map[int]struct{} // beyond a few turns; below, a scan of turns
	isNew := func(x int) bool {
		if seen == nil && len(turns) < 32 {
			return !slices.Contains(turns, x)
		}
		if seen == nil {
			seen = make(map[int]struct{}, 2*len(turns))
			for _, y := range turns {
				seen[y] = struct{}{}
			}
		}
		_, ok := seen[x]
		if !ok {
			seen[x] = struct{}{}
		}
		return !ok
	}
	for _, g := range gens {
		x := g
		if !t.nodes[g].f.retrieval {
			// rets is in start order: the latest retrieval starting no later than g.
			k, _ := slices.BinarySearchFunc(rets, g, func(c, g int) int {
				if t.nodes[c].start.After(t.nodes[g].start) {
					return 1
				}
				return -1
			})
			if k == 0 {
				continue
			}
			x = t.lca(rets[k-1], g)
		}
		if isNew(x) {
			turns = append(turns, x)
		}
	}
	if len(turns) == 0 {
		all := append(append([]int(nil), rets...), gens...)
		if len(all) == 0 {
			return nil
		}
		x := all[0]
		for _, y := range all[1:] {
			x = t.lca(x, y)
		}
		return []int{x}
	}
	if len(turns) == 1 {
		return turns
	}
	// Drop candidates that contain another: mark every ancestor of every candidate once.
	above := make([]bool, len(t.nodes))
	for _, c := range turns {
		for p := t.nodes[c].parent; p >= 0 && !above[p]; p = t.nodes[p].parent {
			above[p] = true
		}
	}
	out := turns[:0:0]
	for _, c := range turns {
		if !above[c] {
			out = append(out, c)
		}
	}
	return out
}

// feedbackByTurn attaches each span's feedback to a turn: the turn containing the span, else the
// last turn the span contains, else the trace's last turn. Per turn the highest-precedence
// feedback wins. nil when the trace carries no feedback.
func (b *builder) feedbackByTurn(turns []int) []*record.Feedback {
	t := b.t
	var out []*record.Feedback
	var rank []int
	for i := 0; i < t.n; i++ {
		f := t.nodes[i].f
		if f.feedback == nil {
			continue
		}
		if out == nil {
			out = make([]*record.Feedback, len(turns))
			rank = make([]int, len(turns))
			for k := range rank {
				rank[k] = rankNone
			}
		}
		target := b.owner[i] - 1
		if target < 0 {
			for k, turn := range turns {
				if t.within(turn, i) {
					target = k
				}
			}
		}
		if target < 0 {
			target = len(turns) - 1
		}
		if f.feedbackRank < rank[target] {
			fb := *f.feedback
			out[target], rank[target] = &fb, f.feedbackRank
		}
	}
	return out
}

// orphanFeedback returns the feedback of a trace without turns, one per span that carries it.
func (t *tree) orphanFeedback(traceID pcommon.TraceID) []record.Feedback {
	var out []record.Feedback
	for i := 0; i < t.n; i++ {
		nd := &t.nodes[i]
		if nd.f.feedback == nil {
			continue
		}
		fb := *nd.f.feedback
		tid := traceID
		if len(nd.span.Links) > 0 && !nd.span.Links[0].TraceID.IsEmpty() {
			tid = nd.span.Links[0].TraceID
		}
		if fb.Time.IsZero() {
			fb.Time = nd.end
		}
		fb.TraceID, fb.Service = tid.String(), nd.span.Service
		out = append(out, fb)
	}
	return out
}

// builder builds the record of one turn.
type builder struct {
	mem     [][]int // the spans of each turn (assignMembers)
	owner   []int   // per node: its turn's index + 1, or -1 (assignMembers)
	t       *tree
	multi   bool
	traceID string
}

// assignMembers lists, for each turn, the real spans within it in start order. Turns never
// contain one another, so each span belongs to at most one: found by walking up with a memo.
func (b *builder) assignMembers(turns []int) {
	t := b.t
	// owner, the member counts and the members, carved from one allocation.
	ints := make([]int, len(t.nodes)+len(turns)+1+t.n)
	owner := ints[:len(t.nodes):len(t.nodes)] // turn index + 1; 0 unknown; -1 none
	counts := ints[len(t.nodes) : len(t.nodes)+len(turns)+1 : len(t.nodes)+len(turns)+1]
	all := ints[len(t.nodes)+len(turns)+1:][:0]
	b.owner = owner
	owner[t.root] = -1
	for k, turn := range turns {
		owner[turn] = k + 1 // the super root too, when the turn's spans have no common ancestor
	}
	var pathBuf [16]int
	path := pathBuf[:0]
	for i := 0; i < t.n; i++ {
		path = path[:0]
		j := i
		for owner[j] == 0 {
			path = append(path, j)
			j = t.nodes[j].parent
		}
		for _, p := range path {
			owner[p] = owner[j]
		}
	}
	// One array for every turn's members: count, then fill.
	for i := 0; i < t.n; i++ {
		if o := owner[i]; o > 0 {
			counts[o]++
		}
	}
	b.mem = make([][]int, len(turns))
	for k := range turns {
		b.mem[k] = all[len(all) : len(all) : len(all)+counts[k+1]]
		all = all[:len(all)+counts[k+1]]
	}
	for i := 0; i < t.n; i++ {
		if o := owner[i]; o > 0 {
			b.mem[o-1] = append(b.mem[o-1], i)
		}
	}
	for _, m := range b.mem {
		slices.SortStableFunc(m, func(x, y int) int { return t.nodes[x].start.Compare(t.nodes[y].start) })
	}
}

// topLevel reports whether i has no ancestor below turn for which is(ancestor) holds.
func (b *builder) topLevel(i, turn int, is func(*facts) bool) bool {
	for j := b.t.nodes[i].parent; j >= 0 && j != turn && b.t.nodes[j].depth > b.t.nodes[turn].depth; j = b.t.nodes[j].parent {
		if f := b.t.nodes[j].f; f != nil && is(f) {
			return false
		}
	}
	return true
}

func isRetrieval(f *facts) bool  { return f.retrieval }
func isGeneration(f *facts) bool { return f.generation }

func (b *builder) build(turn int, mem []int) *record.Record {
	t := b.t
	tn := &t.nodes[turn]
	r := &record.Record{TraceID: b.traceID, Time: tn.start}
	if b.multi && !tn.id.IsEmpty() {
		r.SpanID = tn.id.String()
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

	turnBoth := tn.f != nil && tn.f.retrieval && tn.f.generation
	var rets, gens, leafGens []int
	for _, i := range mem {
		f := t.nodes[i].f
		if f.retrieval && !(turnBoth && i == turn) {
			rets = append(rets, i)
		}
		if f.generation && !(turnBoth && i == turn) {
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
		if b.topLevel(i, turn, isRetrieval) {
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
	ragSpan := b.pick(turn, mem, func(f *facts) bool { return f.ragDocs.Type != TypeEmpty })
	switch {
	case ragSpan >= 0:
		r.Documents = docsFromAny(t.nodes[ragSpan].f.ragDocs.structured())
	default:
		rr := -1
		for _, i := range rets {
			if t.nodes[i].f.rerankDocs != nil && (rr < 0 || !t.nodes[i].end.Before(t.nodes[rr].end)) {
				rr = i
			}
		}
		if rr >= 0 {
			r.Documents = compactDocs(t.nodes[rr].f.rerankDocs)
		} else {
			for _, i := range rets {
				if b.topLevel(i, turn, isRetrieval) {
					r.Documents = appendDocs(r.Documents, b.retrievalDocs(i, rets))
				}
			}
		}
	}
	r.Documents = finishDocs(r.Documents)

	// The answering generation: the last-ending leaf generation that has text.
	answerGen := -1
	slices.SortStableFunc(leafGens, func(x, y int) int { return t.nodes[x].end.Compare(t.nodes[y].end) })
	for k := len(leafGens) - 1; k >= 0; k-- {
		if a := answerOf(t.nodes[leafGens[k]].f); a != "" {
			answerGen = leafGens[k]
			r.Answer = a
			break
		}
	}
	if answerGen < 0 && len(leafGens) > 0 {
		answerGen = leafGens[len(leafGens)-1]
	}
	if s := b.pick(turn, mem, func(f *facts) bool { return f.ragAnswer != "" }); s >= 0 {
		r.Answer = t.nodes[s].f.ragAnswer
	} else if r.Answer == "" && tn.f != nil {
		r.Answer = answerOf(tn.f)
	}

	// Query.
	if s := b.pick(turn, mem, func(f *facts) bool { return f.ragQuery != "" }); s >= 0 {
		r.Query = t.nodes[s].f.ragQuery
	}
	if r.Query == "" && tn.f != nil && !tn.f.retrieval && !tn.f.generation {
		r.Query = inputText(tn.f)
	}
	for _, i := range rets {
		if r.Query != "" {
			break
		}
		r.Query = retrievalQuery(t.nodes[i].f)
	}
	if r.Query == "" && answerGen >= 0 {
		r.Query = lastUserText(t.nodes[answerGen].f)
	}

	// Model and usage.
	if answerGen >= 0 {
		r.Model = modelOf(t.nodes[answerGen].f)
	}
	for k := len(gens) - 1; k >= 0 && r.Model == ""; k-- {
		r.Model = modelOf(t.nodes[gens[k]].f)
	}
	for _, g := range gens {
		f := t.nodes[g].f
		if !f.hasIn && !f.hasOut {
			continue
		}
		counted := false // a descendant generation with usage already counts this call
		for _, h := range gens {
			if h != g && t.within(h, g) && (t.nodes[h].f.hasIn || t.nodes[h].f.hasOut) {
				counted = true
				break
			}
		}
		if !counted {
			r.Usage.InputTokens += f.inTokens
			r.Usage.OutputTokens += f.outTokens
		}
	}

	// Context: the turn span and its ancestors first, then the turn's spans in start order.
	var ctxBuf [16]int
	ctx := b.contextOrder(turn, mem, ctxBuf[:0])
	for _, i := range ctx {
		f := t.nodes[i].f
		if r.SessionID == "" {
			r.SessionID = f.session
		}
		if r.UserID == "" {
			r.UserID = f.user
		}
	}
	route, source, workflow := "", "", ""
	for _, i := range ctx {
		f := t.nodes[i].f
		if route == "" {
			route = f.route
		}
		if source == "" {
			source = f.dataSource
		}
		if workflow == "" {
			workflow = f.workflow
		}
	}
	for _, i := range ctx {
		if route != "" {
			break
		}
		route = t.nodes[i].f.metadataRoute
	}
	r.Attributes = addAttr(r.Attributes, "route", route)
	r.Attributes = addAttr(r.Attributes, "data_source", source)
	r.Attributes = addAttr(r.Attributes, "workflow", workflow)

	// ragwatch's explicit keys.
	if s := b.pick(turn, mem, func(f *facts) bool { return f.ragReference != "" }); s >= 0 {
		r.Reference = t.nodes[s].f.ragReference
	}
	if s := b.pick(turn, mem, func(f *facts) bool { return f.ragRelevance.Type != TypeEmpty }); s >= 0 {
		r.Relevance = relevanceFrom(t.nodes[s].f.ragRelevance)
	}
	if s := b.pick(turn, mem, func(f *facts) bool { return f.ragCitations.Type != TypeEmpty }); s >= 0 {
		r.Citations = citationsFrom(t.nodes[s].f.ragCitations)
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
func (b *builder) pick(turn int, mem []int, has func(*facts) bool) int {
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

// retrievalDocs returns the documents a retrieval span gives; when it names none itself, those
// of the retrievals nested directly under it.
func (b *builder) retrievalDocs(i int, rets []int) []record.Document {
	if docs, ok := ownDocs(b.t.nodes[i].f); ok {
		return docs
	}
	var out []record.Document
	for _, j := range rets {
		if j != i && b.t.within(j, i) && b.topLevel(j, i, isRetrieval) {
			out = appendDocs(out, b.retrievalDocs(j, rets))
		}
	}
	return out
}

// ownDocs returns the documents a span names itself, by source precedence: OpenInference
// retrieval.documents, GenAI gen_ai.retrieval.documents, traceloop.entity.output of a
// vector_db_retrieve span, OpenLLMetry vector-DB result events. ok is true when the span names
// a result, even an empty one.
func ownDocs(f *facts) ([]record.Document, bool) {
	switch {
	case f.oiDocs != nil:
		return compactDocs(f.oiDocs), true
	case f.genaiDocs.Type != TypeEmpty:
		return docsFromAny(f.genaiDocs.structured()), true
	case f.tlOutput.Type != TypeEmpty && f.retrieval:
		if docs := docsFromAny(f.tlOutput.structured()); docs != nil {
			return docs, true
		}
	}
	if f.dbDocs != nil {
		return f.dbDocs, true
	}
	if f.rerankIn != nil {
		return compactDocs(f.rerankIn), true // a reranker that did not report its output
	}
	return nil, f.emptyHits
}

// compactDocs drops the holes a flattened list leaves (indices that carried nothing).
func compactDocs(docs []record.Document) []record.Document {
	out := make([]record.Document, 0, len(docs))
	for _, d := range docs {
		if d.ID == "" && d.Content == "" && d.Score == nil && d.Metadata == nil {
			continue
		}
		out = append(out, d)
	}
	return out
}

// appendDocs appends docs not already present (by id; documents without id compare by content).
func appendDocs(dst, docs []record.Document) []record.Document {
	dst = slices.Grow(dst, len(docs))
	for _, d := range docs {
		dup := false
		for k := range dst {
			if (d.ID != "" && dst[k].ID == d.ID) || (d.ID == "" && dst[k].ID == "" && dst[k].Content == d.Content) {
				dup = true
				break
			}
		}
		if !dup {
			dst = append(dst, d)
		}
	}
	return dst
}

var metadataTextKeys = []string{"text", "page_content", "content", "chunk"}

var metadataIDKeys = []string{"id", "doc_id", "document_id", "chunk_id", "node_id", "_id", "uuid", "pk"}

// finishDocs applies the record limits and gives every document an id: from its metadata when
// there is one, else a stable hash of its content.
func finishDocs(docs []record.Document) []record.Document {
	if len(docs) > record.MaxDocuments {
		docs = docs[:record.MaxDocuments]
	}
	for k := range docs {
		d := &docs[k]
		d.Content = truncate.String(d.Content, record.MaxTextBytes)
		if d.ID == "" {
			for _, key := range metadataIDKeys {
				if v, ok := d.Metadata[key]; ok {
					switch x := v.(type) {
					case string:
						d.ID = x
					case float64:
						d.ID = strconv.FormatFloat(x, 'f', -1, 64)
					}
					if d.ID != "" {
						break
					}
				}
			}
		}
		if d.ID == "" {
			d.ID = contentID(d.Content)
		}
		if d.Content == "" {
			// Vector stores often keep the chunk text in metadata (Pinecone's "text").
			for _, key := range metadataTextKeys {
				if s, ok := d.Metadata[key].(string); ok && s != "" {
					d.Content = truncate.String(s, record.MaxTextBytes)
					break
				}
			}
		}
		if len(d.ID) > record.MaxIDLength {
			d.ID = contentID(d.ID)
		}
	}
	if len(docs) == 0 {
		return nil
	}
	return docs
}

// contentID is a stable id for a document without one: "h" and the FNV-1a 64-bit hash of its
// content in hex.
func contentID(s string) string {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	var buf [17]byte
	buf[0] = 'h'
	const hexdigits = "0123456789abcdef"
	for i := 16; i >= 1; i-- {
		buf[i] = hexdigits[h&0xf]
		h >>= 4
	}
	return string(buf[:])
}

func addAttr(m map[string]string, k, v string) map[string]string {
	if v == "" {
		return m
	}
	if m == nil {
		m = make(map[string]string, 2)
	}
	m[k] = truncate.String(v, 256)
	return m
}

func durMS(start, end time.Time) float64 {
	if start.IsZero() || end.IsZero() || end.Before(start) {
		return 0
	}
	return math.Round(float64(end.Sub(start))/1e3) / 1e3
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
