package assemble

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ragwatch/ragwatch/collector/facts"
	"github.com/ragwatch/ragwatch/internal/record"
)

// findTurns applies the turn rule: each generation is paired with the latest retrieval that
// started no later than it; the pair's turn is the innermost span containing both. Turns that
// contain another turn are dropped (they are the conversation or agent around the turns). With no
// pair at all, a trace that has a retrieval or a generation gives one turn: the innermost span
// containing all of them. turns is an empty buffer the result may use (the scratch's).
func (t *tree) findTurns(rets, gens, turns []int) []int {
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
		if !t.nodes[g].f.Retrieval {
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

// assignMembers lists, for each turn, the real spans within it in start order. Turns never
// contain one another, so each span belongs to at most one: found by walking up with a memo.
func (b *builder) assignMembers(turns []int, sc *scratch) {
	t := b.t
	// owner, the member counts and the members, carved from one array (the scratch's).
	n := len(t.nodes) + len(turns) + 1 + t.n
	if cap(sc.ints) < n {
		sc.ints = make([]int, n)
	}
	ints := sc.ints[:n]
	clear(ints)
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
	if cap(sc.mem) < len(turns) {
		sc.mem = make([][]int, len(turns))
	}
	b.mem = sc.mem[:len(turns)]
	sc.mem = b.mem // release clears it
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

// feedbackByTurn attaches each span's feedback to a turn: the turn containing the span, else the
// last turn the span contains, else the trace's last turn. Per turn the highest-precedence
// feedback wins. nil when the trace carries no feedback.
func (b *builder) feedbackByTurn(turns []int) []*record.Feedback {
	t := b.t
	var out []*record.Feedback
	var rank []int
	for i := 0; i < t.n; i++ {
		f := t.nodes[i].f
		if f.Feedback == nil {
			continue
		}
		if out == nil {
			out = make([]*record.Feedback, len(turns))
			rank = make([]int, len(turns))
			for k := range rank {
				rank[k] = facts.RankNone
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
		if f.FeedbackRank < rank[target] {
			fb := *f.Feedback
			out[target], rank[target] = &fb, f.FeedbackRank
		}
	}
	return out
}

// orphanFeedback returns the feedback of a trace without turns, one per span that carries it.
func (t *tree) orphanFeedback(traceID pcommon.TraceID) []record.Feedback {
	var out []record.Feedback
	for i := 0; i < t.n; i++ {
		nd := &t.nodes[i]
		if nd.f.Feedback == nil {
			continue
		}
		fb := *nd.f.Feedback
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
