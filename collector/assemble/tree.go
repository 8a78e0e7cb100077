package assemble

import (
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ragwatch/ragwatch/collector/facts"
	"github.com/ragwatch/ragwatch/collector/span"
)

// node is one span of the trace tree, or a virtual node: the parent a span names but that never
// arrived, or the super root above every root.
type node struct {
	parent     int
	depth      int
	start, end time.Time
	span       *span.Span   // nil for virtual nodes
	f          *facts.Facts // nil for virtual nodes
	id         pcommon.SpanID
}

type tree struct {
	tin, tout []int // DFS numbering, for large trees only (numberNodes)
	nodes     []node
	n         int // real spans are nodes[:n]
	root      int // the super root
	facts     []facts.Facts
}

func buildTree(spans []span.Span, sc *scratch, opts *Options) tree {
	n := len(spans)
	t := tree{n: n, facts: sc.facts[:n]}
	t.nodes = sc.nodes[:n]
	idx := newSpanIndex(n)
	calls := false // an AI SDK call is among the spans (demoteCalls)
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
			t.facts[i].FeedbackRank = facts.RankNone // a redelivered copy says nothing new
			continue
		}
		f := &t.facts[i]
		facts.Read(f, s)
		if f.Tool && opts != nil && slices.Contains(opts.RetrievalTools, f.ToolName) {
			facts.MarkRetrieval(f)
		}
		calls = calls || f.Call
		idx.put(s.SpanID, i)
	}
	missing := newSpanIndex(0)
	roots := sc.roots[:0]
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
	sc.roots = roots[:0] // kept grown for the next trace
	t.computeDepths()
	if len(t.nodes) > eulerMin {
		t.numberNodes()
	}
	if calls {
		t.demoteCalls()
	}
	return t
}

// demoteCalls makes every AI SDK call (facts.Call: generateText, streamText, ...) that has a
// generation nested in it (its doGenerate / doStream steps) no generation itself: each model
// call is one generation, and the call around them is the turn's context (its prompt the
// question, its text the answer when no step has one), as a chain span is.
func (t *tree) demoteCalls() {
	for i := 0; i < t.n; i++ {
		if f := t.nodes[i].f; !f.Generation || f.Call {
			continue
		}
		for p := t.nodes[i].parent; p >= 0 && p != t.root; p = t.nodes[p].parent {
			if pf := t.nodes[p].f; pf != nil && pf.Call {
				pf.Generation = false
			}
		}
	}
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
	facts []facts.Facts
	nodes []node
	ids   []pcommon.SpanID // the span index of a small trace
	at    []int
	// The lists of span indices assembly builds (no pointers: reused without clearing):
	// the retrievals and generations, the turns, and assignMembers' owners and members.
	rets, gens, turns, ints, roots []int
	mem                            [][]int
	// tree is the trace's tree, here so that it is not an allocation of its own.
	tree tree
	// attrs shares records' attributes maps across the traces this scratch assembles.
	attrs *attrMaps
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledSpans keeps a huge trace's scratch out of the pool.
const maxPooledSpans = 256

func getScratch(n int) *scratch {
	if n > maxPooledSpans {
		return &scratch{facts: make([]facts.Facts, n), nodes: make([]node, n, 2*n+1)}
	}
	sc := scratchPool.Get().(*scratch)
	if sc.attrs == nil {
		sc.attrs = newAttrMaps()
	}
	if cap(sc.facts) < n {
		sc.facts = make([]facts.Facts, n, max(n, 8))
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
	for i := range sc.facts {
		sc.facts[i].Reset()
	}
	clear(sc.nodes[:min(nodes, cap(sc.nodes))])
	clear(sc.mem) // views of ints
	sc.mem = sc.mem[:0]
	sc.tree = tree{}
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
