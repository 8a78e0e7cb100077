package builtin

import (
	"math"
	"slices"
	"sync"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/text"
)

// index is the retrieved context prepared for claim verification: its passage windows (each
// sentence of each document; a long sentence is cut into overlapping windows of windowTerms
// content terms), a vocabulary of stems, and inverse sentence frequencies computed from the
// context itself, so that a claim's distinctive words weigh more than words every passage
// repeats.
type index struct {
	vocab   map[string]int32
	idf     []float64 // by term id
	novel   float64   // weight of a claim term found nowhere in the context
	windows []window
	docWin  [][2]int // document index → its windows, ix.windows[from:to]
	// postings lists, by term id, the windows that hold the term in window order:
	// post[postAt[id]:postAt[id+1]]. A claim's coverage of every window is then a pass over the
	// postings of its terms rather than a search for each term in each window.
	post   []int32
	postAt []int32

	// supportWindow's scratch, reused claim after claim (an index serves one goroutine).
	seen  map[string]bool
	terms []claimTerm
	hints []string
	cov   []float64 // by window

	ids  []int32 // holds the windows' terms, document after document (int32s)
	next []int32 // postings' scratch
}

// indexes pools indexes: a record's index goes back once the record is scored (judge.release),
// and the next record's reuses its vocabulary table and arrays instead of allocating them
// again. The vocabulary alone was about 40 % of the bytes scoring a record allocated
// (BenchmarkBuiltinSynth).
var indexes = sync.Pool{New: func() any { return &index{} }}

// release empties ix, dropping what refers to the record (the vocabulary's keys are
// substrings of its documents), and returns it to the pool unless one huge context grew it:
// every later record would clear a table of its size.
func (ix *index) release() {
	if len(ix.vocab) > maxPooledWords || cap(ix.ids) > maxPooledTerms {
		return
	}
	ix.reset()
	indexes.Put(ix)
}

// reset empties ix for another context, keeping its table and arrays.
func (ix *index) reset() {
	clear(ix.vocab)
	clear(ix.windows[:cap(ix.windows)])
	clear(ix.seen)
	clear(ix.hints[:cap(ix.hints)])
	ix.windows, ix.docWin, ix.idf = ix.windows[:0], ix.docWin[:0], ix.idf[:0]
	ix.post, ix.postAt, ix.ids, ix.terms, ix.hints = ix.post[:0], ix.postAt[:0], ix.ids[:0], ix.terms[:0], ix.hints[:0]
}

// maxPooledTerms bounds the terms array a pooled index keeps (1 MiB).
const maxPooledTerms = 1 << 18

// int32s returns n int32s of ix's terms array, for windows: a full array is replaced by a
// larger one, and the windows already made keep the old.
func (ix *index) int32s(n int) []int32 {
	if len(ix.ids)+n > cap(ix.ids) {
		ix.ids = make([]int32, 0, max(2*cap(ix.ids), n, 1024))
	}
	from := len(ix.ids)
	ix.ids = ix.ids[:from+n]
	return ix.ids[from : from+n : from+n]
}

// sized returns s with length n, reusing its array when it is large enough; the elements are
// not cleared.
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Limits that bound the cost of one record whatever its size: context beyond maxContextBytes
// (over all documents, in order) is not indexed, and only the first maxClaims claims of a text
// are judged. Explanations say when a limit applied.
const (
	maxContextBytes = 1 << 20
	maxClaims       = 256
)

type window struct {
	terms []int32 // sorted unique ids of content stems (and antonym-bearing function words)
	neg   bool    // holds a negation cue
}

// Support parameters; docs/scorer-quality.md explains each and how it was chosen.
const (
	windowTerms    = 40   // a sentence longer than this many terms is cut into windows
	windowWeight   = 0.5  // share of a claim's support from its best window (the rest: whole context)
	missingNumber  = 0.35 // factor per claim number found nowhere in the context
	strayNumber    = 0.8  // factor per claim number in the context but not in the best window
	missingEntity  = 0.6  // factor per capitalised claim word found nowhere in the context
	negationFactor = 0.6  // claim and its closely matching window disagree on negation
	negationCover  = 0.7  // how closely (weighted coverage) a window must match for that check
	antonymFactor  = 0.6  // claim uses a word whose antonym (and not the word) is in the window
)

// newIndex builds the index over docs, with the documents' entries kept by docs.
func newIndex(docs []record.Document) *index {
	return buildIndex(docs, sharedDocCache)
}

// buildIndex builds the index over docs. A document whose content c holds (nil: none) is not
// read again: its entry gives its sentences' terms, which only need this record's vocabulary
// ids. Either way the index is the same, bit for bit: ids are given in order of first
// occurrence in the context, and each window holds the same terms.
func buildIndex(docs []record.Document, c *docCache) *index {
	return fillIndex(indexes.Get().(*index), docs, c)
}

// fillIndex builds the index over docs in ix, empty or reset.
func fillIndex(ix *index, docs []record.Document, c *docCache) *index {
	b := getBuilder(ix)
	defer b.release()
	// The entries at hand first: they tell (at most) how many terms and windows to make room for.
	entries := b.entries[:0]
	defer func() { clear(entries); b.entries = entries[:0] }()
	nTerms, nWin := 0, 0
	budget := maxContextBytes
	for d := range docs {
		content := docs[d].Content
		if len(content) > budget {
			content = content[:budget] // the key is what is indexed, never the whole content
		}
		budget -= len(content)
		e := c.get(content)
		if e != nil {
			nTerms += len(e.ends)
			nWin += e.windows()
		}
		entries = append(entries, e)
	}
	if ix.vocab == nil {
		ix.vocab = make(map[string]int32, nTerms) // a pooled index keeps its table, cleared
	}
	ix.windows = slices.Grow(ix.windows[:0], nWin)
	nSent := 0
	budget = maxContextBytes
	ix.docWin = sized(ix.docWin, len(docs))
	for d, e := range entries {
		ix.docWin[d][0] = len(ix.windows)
		content := docs[d].Content
		if len(content) > budget {
			content = content[:budget]
		}
		budget -= len(content)
		if e != nil {
			nSent += b.add(e, nil)
		} else if content != "" {
			e := b.read(content)
			nSent += b.add(e, b.rec)
			c.put(e, b.docStems)
		}
		ix.docWin[d][1] = len(ix.windows)
	}
	df := b.df
	ix.postings(len(df))
	n := float64(max(nSent, 1))
	ix.idf = sized(ix.idf, len(df))
	for id, f := range df {
		ix.idf[id] = math.Log(1 + n/float64(f))
	}
	ix.novel = math.Log(1 + n/0.5)
	return ix
}

// read splits content into sentences and words and returns its entry, in b's scratch (valid
// until the next read) and without its stems: b.rec maps its local ids to the vocabulary's,
// which read extends with the document's new stems in order of first occurrence, and
// b.docStems holds its stems.
func (b *indexBuilder) read(content string) *docEntry {
	e := &b.entry
	e.content, e.terms, e.sents, e.wins = content, e.terms[:0], e.sents[:0], e.wins[:0]
	rec := b.rec[:0]
	// The id buffer serves every sentence, and the sentence buffer the document.
	ids := b.ids
	sents := text.AppendSentences(b.sents[:0], content)
	for _, sent := range sents {
		ids = ids[:0]
		neg := false
		for word := range rawWords(sent) {
			w := b.terms(word)
			neg = neg || w.neg
			for _, id := range w.ids[:w.n] {
				l := b.local[id]
				if l < 0 {
					l = int32(len(rec))
					b.local[id] = l
					rec = append(rec, id)
				}
				ids = append(ids, l)
			}
		}
		if len(ids) == 0 {
			continue
		}
		s := docSent{neg: neg}
		s.uniq = e.appendSet(ids)
		if len(ids) > windowTerms {
			// A run-on sentence (a table row, an unpunctuated chunk): overlapping windows.
			s.wins[0] = int32(len(e.wins))
			for start := 0; start < len(ids); start += windowTerms / 2 {
				e.wins = append(e.wins, e.appendSet(ids[start:min(start+windowTerms, len(ids))]))
				if start+windowTerms >= len(ids) {
					break
				}
			}
			s.wins[1] = int32(len(e.wins))
		}
		e.sents = append(e.sents, s)
	}
	for _, id := range rec {
		b.local[id] = -1
	}
	stems := b.docStems[:0]
	for _, id := range rec {
		stems = append(stems, b.stems[id])
	}
	b.docStems = stems
	b.ids, b.sents, b.rec = ids, sents, rec
	return e
}

// add appends the windows of the document e to the index and counts its sentences' terms,
// and returns how many sentences it has. rec maps e's local ids to vocabulary ids (nil: add
// looks its stems up, adding the new ones in order).
func (b *indexBuilder) add(e *docEntry, rec []int32) int {
	if rec == nil {
		rec = b.rec[:0]
		from := int32(0)
		for _, end := range e.ends {
			stem := e.stems[from:end]
			from = end
			id, ok := b.ix.vocab[stem]
			if !ok {
				id = b.newID(stem)
			}
			rec = append(rec, id)
		}
		b.rec = rec
	}
	// One array holds every window's terms: they are read only.
	ids := b.ix.int32s(len(e.terms))
	for i, l := range e.terms {
		ids[i] = rec[l]
	}
	ix := b.ix
	for _, s := range e.sents {
		uniq := ids[s.uniq[0]:s.uniq[1]:s.uniq[1]]
		slices.Sort(uniq)
		for _, id := range uniq {
			b.df[id]++
		}
		if s.wins[0] == s.wins[1] {
			ix.windows = append(ix.windows, window{terms: uniq, neg: s.neg})
			continue
		}
		for _, w := range e.wins[s.wins[0]:s.wins[1]] {
			terms := ids[w[0]:w[1]:w[1]]
			slices.Sort(terms)
			ix.windows = append(ix.windows, window{terms: terms, neg: s.neg})
		}
	}
	return len(e.sents)
}

// postings builds ix.post and ix.postAt over ix.windows for a vocabulary of n terms.
func (ix *index) postings(n int) {
	ix.postAt = sized(ix.postAt, n+1)
	clear(ix.postAt)
	for _, w := range ix.windows {
		for _, id := range w.terms {
			ix.postAt[id+1]++
		}
	}
	for id := 1; id <= n; id++ {
		ix.postAt[id] += ix.postAt[id-1]
	}
	ix.post = sized(ix.post, int(ix.postAt[n]))
	ix.next = append(ix.next[:0], ix.postAt[:n]...)
	next := ix.next
	for w, win := range ix.windows {
		for _, id := range win.terms {
			ix.post[next[id]] = int32(w)
			next[id]++
		}
	}
}

// indexBuilder turns the context's words into vocabulary ids. A context repeats most of its
// words, so each distinct word is normalised (lower case, lexicon, stem) and looked up in the
// vocabulary once, and remembered with its ids. Builders are pooled: record after record, the
// word table and the buffers keep their capacity instead of growing anew.
type indexBuilder struct {
	ix       *index
	df       []int    // by term id: how many sentences hold the term
	stems    []string // by term id: the stem (the vocabulary's key)
	local    []int32  // by term id: its local id in the document being read, -1 when none yet
	rec      []int32  // by local id: the term id, for the document being added
	words    map[string]wordTerms
	ids      []int32
	sents    []string
	entry    docEntry // read's scratch: the document's entry, but its stems
	docStems []string // read's scratch: by local id, the stem

	entries []*docEntry // buildIndex's, by document: its cached entry or nil
}

var builders = sync.Pool{New: func() any { return &indexBuilder{words: map[string]wordTerms{}} }}

// maxPooledWords bounds the word table a builder keeps for the next record: one huge context
// must not leave every later record clearing a huge table.
const maxPooledWords = 1 << 13

func getBuilder(ix *index) *indexBuilder {
	b := builders.Get().(*indexBuilder)
	b.ix = ix
	return b
}

// release empties b, dropping what refers to the record (the table's keys, the stems and the
// sentences are substrings of its documents), and returns it to the pool.
func (b *indexBuilder) release() {
	if len(b.words) > maxPooledWords {
		return
	}
	clear(b.words)
	clear(b.sents[:cap(b.sents)])
	clear(b.stems[:cap(b.stems)])
	clear(b.docStems[:cap(b.docStems)])
	b.entry.content, b.docStems = "", b.docStems[:0]
	b.ix, b.df, b.ids, b.sents = nil, b.df[:0], b.ids[:0], b.sents[:0]
	b.stems, b.local, b.rec = b.stems[:0], b.local[:0], b.rec[:0]
	builders.Put(b)
}

// newID adds stem to the vocabulary.
func (b *indexBuilder) newID(stem string) int32 {
	id := int32(len(b.ix.vocab))
	b.ix.vocab[stem] = id
	b.df = append(b.df, 0)
	b.stems = append(b.stems, stem)
	b.local = append(b.local, -1)
	return id
}

// wordTerms is what one written word contributes to a window: the ids of its indexed tokens
// (at most two: "don't" is do + not) and whether it is a negation cue.
type wordTerms struct {
	ids [2]int32
	n   int
	neg bool
}

// terms returns word's contribution, adding its stems to the vocabulary on first sight. A
// word's index terms do not depend on where it stands in its sentence (only its capitalisation
// flag does, which the index does not keep).
func (b *indexBuilder) terms(word string) wordTerms {
	if w, ok := b.words[word]; ok {
		return w
	}
	var w wordTerms
	var buf [2]token
	for _, t := range appendWord(buf[:0], word, false) {
		if t.neg {
			w.neg = true
		}
		if t.stop && !t.num && antonyms[t.stem] == nil {
			continue
		}
		id, ok := b.ix.vocab[t.stem]
		if !ok {
			id = b.newID(t.stem)
		}
		w.ids[w.n] = id
		w.n++
	}
	b.words[word] = w
	return w
}

// claimTerm is one distinct content term of a claim.
type claimTerm struct {
	id     int32 // -1 when absent from the context
	weight float64
	num    bool
	cap    bool
}

// support scores how well the context supports one claim, in [0, 1], and names the main
// reason when a penalty applied. docs limits the windows to those documents (nil: all).
//
// The score mixes the claim's weighted term coverage by its best window with its coverage by
// the whole context (a claim may fuse two sentences), then multiplies penalties: numbers and
// capitalised names must occur in the context (numbers preferably in the best window), a
// negation the best window lacks (or the reverse) and an antonym in place of the claim's word
// signal a contradiction.
func (ix *index) support(toks []token, docs map[int]bool) (float64, string) {
	v, why, _ := ix.supportWindow(toks, docs, nil)
	return v, why
}

// claimEvidence is what supportWindow saw of one claim beyond its support: the inputs of the
// learned models (learned.go). Counting them costs a few additions per claim term.
type claimEvidence struct {
	support        float64
	window, global float64 // shares of the claim's term weight in its best window / the context
	terms          int     // distinct content terms
	novel          int     // of them, found nowhere in the context
	missingNumbers int     // claim numbers found nowhere in the context
	strayNumbers   int     // in the context but not in the best window
	missingNames   int     // capitalised claim words found nowhere in the context
	negation       bool    // claim and best window disagree on negation
	antonyms       int     // claim words whose antonym, not the word, is in the best window
}

// supportWindow is support, and the index of the claim's best window (-1: none). When ev is
// not nil it receives the evidence behind the support.
func (ix *index) supportWindow(toks []token, docs map[int]bool, ev *claimEvidence) (float64, string, int) {
	if ix.seen == nil {
		ix.seen = map[string]bool{}
	}
	clear(ix.seen)
	seen := ix.seen
	terms := ix.terms[:0]
	defer func() { ix.terms = terms[:0] }()
	claimNeg := false
	hints := ix.hints[:0] // stems that have antonyms
	defer func() { ix.hints = hints[:0] }()
	for _, t := range toks {
		if t.neg {
			claimNeg = true
		}
		if antonyms[t.stem] != nil {
			hints = append(hints, t.stem)
		}
		if (t.stop && !t.num) || t.meta || seen[t.stem] {
			continue
		}
		seen[t.stem] = true
		ct := claimTerm{id: -1, weight: math.Sqrt(ix.novel), num: t.num, cap: t.cap}
		if id, ok := ix.vocab[t.stem]; ok && (docs == nil || ix.inDocs(id, docs)) {
			ct.id = id
			ct.weight = math.Sqrt(ix.idf[id])
		}
		terms = append(terms, ct)
	}
	if len(terms) == 0 {
		if ev != nil {
			*ev = claimEvidence{support: 1, window: 1, global: 1}
		}
		return 1, "", -1
	}
	total, global := 0.0, 0.0
	for _, ct := range terms {
		total += ct.weight
		if ct.id >= 0 {
			global += ct.weight
		}
	}
	// Each window's coverage: the weights of the claim terms it holds, added in claim order.
	if len(ix.cov) < len(ix.windows) {
		ix.cov = make([]float64, len(ix.windows))
	}
	cov := ix.cov[:len(ix.windows)]
	clear(cov)
	for _, ct := range terms {
		if ct.id < 0 {
			continue
		}
		for _, w := range ix.post[ix.postAt[ct.id]:ix.postAt[ct.id+1]] {
			cov[w] += ct.weight
		}
	}
	best, bestCov := -1, -1.0
	ix.eachWindow(docs, func(w int) bool {
		if cov[w] > bestCov {
			best, bestCov = w, cov[w]
		}
		return true
	})
	if best < 0 {
		if ev != nil {
			*ev = claimEvidence{terms: len(terms), novel: len(terms)}
		}
		return 0, "no context", -1
	}
	win := &ix.windows[best]
	score := (windowWeight*bestCov + (1-windowWeight)*global) / total
	why := ""
	note := func(s string) {
		if why == "" {
			why = s
		}
	}
	var e claimEvidence
	for _, ct := range terms {
		if ct.id < 0 {
			e.novel++
		}
		switch {
		case ct.num && ct.id < 0:
			score *= missingNumber
			note("number not in context")
			e.missingNumbers++
		case ct.num && !has(win.terms, ct.id):
			score *= strayNumber
			note("number not in best passage")
			e.strayNumbers++
		case ct.cap && ct.id < 0:
			score *= missingEntity
			note("name not in context")
			e.missingNames++
		}
	}
	if bestCov/total >= negationCover && claimNeg != win.neg {
		score *= negationFactor
		note("negation differs from passage")
		e.negation = true
	}
	for _, h := range hints {
		if id, ok := ix.vocab[h]; ok && has(win.terms, id) {
			continue
		}
		for _, a := range antonyms[h] {
			if aid, ok := ix.vocab[a]; ok && has(win.terms, aid) {
				score *= antonymFactor
				note("contradicting word in passage")
				e.antonyms++
				break
			}
		}
	}
	if ev != nil {
		e.support, e.window, e.global, e.terms = clamp01(score), bestCov/total, global/total, len(terms)
		*ev = e
	}
	return clamp01(score), why, best
}

// eachWindow calls f with the index of every window of docs (nil: all) in order, until f
// returns false.
func (ix *index) eachWindow(docs map[int]bool, f func(w int) bool) {
	if docs == nil {
		for w := range ix.windows {
			if !f(w) {
				return
			}
		}
		return
	}
	for d := range ix.docWin {
		if !docs[d] {
			continue
		}
		for w := ix.docWin[d][0]; w < ix.docWin[d][1]; w++ {
			if !f(w) {
				return
			}
		}
	}
}

// inDocs reports whether term id occurs in a window of one of docs.
func (ix *index) inDocs(id int32, docs map[int]bool) bool {
	found := false
	ix.eachWindow(docs, func(w int) bool {
		found = has(ix.windows[w].terms, id)
		return !found
	})
	return found
}

func has(sorted []int32, id int32) bool {
	_, ok := slices.BinarySearch(sorted, id)
	return ok
}

func clamp01(v float64) float64 {
	switch {
	case math.IsNaN(v) || v < 0:
		return 0
	case v > 1:
		return 1
	}
	return v
}
