package builtin

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/text"
)

// referenceIndex is newIndex as it was before documents were cached: every sentence of every
// document read, and vocabulary ids given as words come. Indexes built through the cache,
// warm or cold, must equal it.
func referenceIndex(docs []record.Document) *index {
	ix := &index{vocab: map[string]int32{}}
	b := getBuilder(ix)
	defer b.release()
	nSent := 0
	budget := maxContextBytes
	ix.docWin = make([][2]int, len(docs))
	for d := range docs {
		ix.docWin[d][0] = len(ix.windows)
		content := docs[d].Content
		if len(content) > budget {
			content = content[:budget]
		}
		budget -= len(content)
		for _, sent := range text.AppendSentences(nil, content) {
			var ids []int32
			neg := false
			for word := range rawWords(sent) {
				w := b.terms(word)
				neg = neg || w.neg
				ids = append(ids, w.ids[:w.n]...)
			}
			if len(ids) == 0 {
				continue
			}
			nSent++
			uniq := slices.Compact(slices.Sorted(slices.Values(ids)))
			for _, id := range uniq {
				b.df[id]++
			}
			if len(ids) <= windowTerms {
				ix.windows = append(ix.windows, window{terms: uniq, neg: neg})
				continue
			}
			for start := 0; start < len(ids); start += windowTerms / 2 {
				w := slices.Compact(slices.Sorted(slices.Values(ids[start:min(start+windowTerms, len(ids))])))
				ix.windows = append(ix.windows, window{terms: w, neg: neg})
				if start+windowTerms >= len(ids) {
					break
				}
			}
		}
		ix.docWin[d][1] = len(ix.windows)
	}
	ix.postings(len(b.df))
	n := float64(max(nSent, 1))
	ix.idf = make([]float64, len(b.df))
	for id, f := range b.df {
		ix.idf[id] = math.Log(1 + n/float64(f))
	}
	ix.novel = math.Log(1 + n/0.5)
	return ix
}

// sameIndex fails t unless got and want are the same index, bit for bit.
func sameIndex(t *testing.T, what string, got, want *index) {
	t.Helper()
	if err := diffIndex(got, want); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// diffIndex says how got differs from want.
func diffIndex(got, want *index) error {
	if !reflect.DeepEqual(got.vocab, want.vocab) {
		return fmt.Errorf("vocabulary\n got %v\nwant %v", got.vocab, want.vocab)
	}
	if !slices.Equal(got.idf, want.idf) || got.novel != want.novel {
		return fmt.Errorf("idf %v novel %v, want %v %v", got.idf, got.novel, want.idf, want.novel)
	}
	if !slices.Equal(got.docWin, want.docWin) {
		return fmt.Errorf("document windows %v, want %v", got.docWin, want.docWin)
	}
	if len(got.windows) != len(want.windows) {
		return fmt.Errorf("%d windows, want %d", len(got.windows), len(want.windows))
	}
	for i := range got.windows {
		g, w := got.windows[i], want.windows[i]
		if !slices.Equal(g.terms, w.terms) || g.neg != w.neg {
			return fmt.Errorf("window %d is %v, want %v", i, g, w)
		}
	}
	if !slices.Equal(got.post, want.post) || !slices.Equal(got.postAt, want.postAt) {
		return errors.New("postings differ")
	}
	return nil
}

// cacheDocs are documents that tempt a wrong entry: the same length, one the prefix of
// another, the same words in another order, a run-on sentence cut into windows, negations and
// contractions, a document without a content word, and one repeated in a record.
var cacheDocs = []string{
	"The bridge opened in 1937. It does not carry trains. Whales migrate south every winter.",
	"The bridge opened in 1938. It does not carry trains. Whales migrate south every winter.",
	"The bridge opened in 1937. It does not carry trains.",
	"Whales migrate south every winter. The bridge opened in 1937. It doesn't carry trains!",
	"Whales don't migrate north in the summer; the tunnel closed in 1990 and isn't open.",
	strings.Repeat("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau ", 6) + "end.",
	"The cheap plan is not expensive. Dr. Smith of the U.S. survey led the 3.5 km tundra work in 1,600 days.",
	"And the, of it. To be or not to be.",
	"",
}

func cacheRecord(idx ...int) []record.Document {
	docs := make([]record.Document, len(idx))
	for i, k := range idx {
		docs[i] = record.Document{ID: fmt.Sprint(i), Content: cacheDocs[k]}
	}
	return docs
}

func TestCachedIndexIsTheUncachedIndex(t *testing.T) {
	c := newDocCache(1 << 20)
	records := [][]int{
		{0, 1, 2, 3}, {3, 2, 1, 0}, {1}, {0}, {2, 0}, {4, 5, 6, 7, 8}, {8, 7, 6, 5, 4},
		{6, 0, 6}, {5, 5}, {3, 4, 0, 1, 2, 5, 6, 7, 8}, {8}, {7},
	}
	for pass := range 2 { // cold, then warm
		for _, r := range records {
			docs := cacheRecord(r...)
			want := referenceIndex(docs)
			what := fmt.Sprintf("pass %d, documents %v", pass, r)
			sameIndex(t, what+", no cache", buildIndex(docs, nil), want)
			sameIndex(t, what, buildIndex(docs, c), want)
		}
	}
	st := c.stats()
	// Every non-empty document has its own entry, and the second pass only hit.
	if st.entries != len(cacheDocs)-1 || st.misses != len(cacheDocs)-1 || st.hits < 20 {
		t.Fatalf("cache %+v: want %d entries and misses, and hits", st, len(cacheDocs)-1)
	}
	// A hit gives the entry of that content, not of another of the same length.
	if e := c.get(cacheDocs[1]); e == nil || e.content != cacheDocs[1] {
		t.Fatalf("entry for %q is %v", cacheDocs[1], e)
	}
}

// An index reset for another context (as the pool reuses it) is the index a fresh one gives:
// larger after smaller and smaller after larger, cached and not, and its claims' support too.
func TestReusedIndexIsAFreshIndex(t *testing.T) {
	records := [][]int{
		{5, 6, 7}, {0}, {3, 4, 0, 1, 2, 5, 6, 7, 8}, {8}, {1, 1}, {4, 5, 6, 7, 8}, {7}, {2, 0},
	}
	claims := []string{
		"The bridge opened in 1937.", "Whales do not migrate south.", "Dr. Smith led the 3.5 km tundra work.",
		"The tunnel is open in summer.", "alpha beta omega",
	}
	for _, c := range []*docCache{nil, newDocCache(1 << 20)} {
		ix := &index{}
		for pass := range 2 {
			for i, r := range records {
				docs := cacheRecord(r...)
				want := referenceIndex(docs)
				ix.reset()
				got := fillIndex(ix, docs, c)
				what := fmt.Sprintf("cache %v, pass %d, record %d %v", c != nil, pass, i, r)
				sameIndex(t, what, got, want)
				for _, claim := range claims {
					gv, gwhy, gw := got.supportWindow(tokenize(claim), nil, nil)
					wv, wwhy, ww := want.supportWindow(tokenize(claim), nil, nil)
					if gv != wv || gwhy != wwhy || gw != ww {
						t.Fatalf("%s: support of %q is %v %q window %d, want %v %q window %d", what, claim, gv, gwhy, gw, wv, wwhy, ww)
					}
				}
			}
			slices.Reverse(records)
		}
	}
}

// A document cut by the context budget is indexed (and kept) as what is indexed: its whole
// content in another record is another entry.
func TestBudgetTruncatedDocumentHasItsOwnEntry(t *testing.T) {
	c := newDocCache(1 << 20)
	small := strings.Repeat("Whales migrate south every winter, and the bridge opened in 1937. ", 12)
	const keep = 300
	big := strings.Repeat("The tower is made of wrought iron. ", maxContextBytes/35+1)[:maxContextBytes-keep]
	for _, docs := range [][]record.Document{
		{{ID: "s", Content: small}},
		{{ID: "b", Content: big}, {ID: "s", Content: small}},
		{{ID: "s", Content: small}},
		{{ID: "b", Content: big}, {ID: "s", Content: small}},
	} {
		sameIndex(t, fmt.Sprintf("%d documents", len(docs)), buildIndex(docs, c), referenceIndex(docs))
	}
	if e := c.get(small[:keep]); e == nil || e.content != small[:keep] {
		t.Fatalf("no entry for the document cut at %d bytes", keep)
	}
	if e := c.get(small); e == nil || e.content != small {
		t.Fatal("no entry for the whole document")
	}
	if st := c.stats(); st.entries != 2 {
		t.Fatalf("cache %+v: want the whole and the cut document only (the big one is too large)", st)
	}
}

func TestDocCacheKeepsItsBound(t *testing.T) {
	const bound = 64 << 10
	c := newDocCache(bound)
	rng := rand.New(rand.NewPCG(1, 2))
	doc := func(i int) string {
		return fmt.Sprintf("Survey %d of the glacier covered %d square kilometres in %d. The team reported sediment levels. ", i, i*7, 1900+i%100)
	}
	hot := doc(-1)
	for i := range 2000 {
		// A stream of new documents, and one read again every few records: it stays.
		docs := []record.Document{{ID: "n", Content: doc(i)}}
		if i%20 == 0 {
			docs = append(docs, record.Document{ID: "h", Content: hot})
		}
		if rng.IntN(4) == 0 { // and one read a while ago
			docs = append(docs, record.Document{ID: "o", Content: doc(rng.IntN(i + 1))})
		}
		ix := buildIndex(docs, c)
		if i%97 == 0 {
			sameIndex(t, fmt.Sprintf("record %d", i), ix, referenceIndex(docs))
		}
		st := c.stats()
		if st.bytes > bound {
			t.Fatalf("record %d: cache holds %d bytes, over its bound %d", i, st.bytes, bound)
		}
		if i > 100 && st.bytes < bound/4 {
			t.Fatalf("record %d: cache holds only %d bytes of %d", i, st.bytes, bound)
		}
	}
	st := c.stats()
	if st.entries >= 2000 || st.entries < 20 {
		t.Fatalf("cache %+v: want old entries dropped and recent ones kept", st)
	}
	if e := c.get(hot); e == nil {
		t.Fatal("the document read every 20 records was dropped")
	}
	// Too large to keep: it would push out many small entries.
	large := strings.Repeat(doc(1), bound/16/len(doc(1))+1)
	buildIndex([]record.Document{{ID: "l", Content: large}}, c)
	if c.get(large) != nil {
		t.Fatalf("a %d-byte document was kept in a %d-byte cache", len(large), bound)
	}
}

// Scoring goroutines share the cache (run with -race): each index is the uncached one while
// entries come and go.
func TestDocCacheConcurrentUse(t *testing.T) {
	c := newDocCache(8 << 10) // small: entries are evicted while others read them
	var pool []string
	for i := range 40 {
		pool = append(pool, fmt.Sprintf("Document %d says the river floods in spring; it doesn't in year %d. %s", i, 2000+i, cacheDocs[i%len(cacheDocs)]))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 150 {
				var docs []record.Document
				for k := range 1 + rng.IntN(5) {
					docs = append(docs, record.Document{ID: fmt.Sprint(k), Content: pool[rng.IntN(len(pool))]})
				}
				if err := diffIndex(buildIndex(docs, c), referenceIndex(docs)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := c.stats(); st.hits == 0 || st.bytes > 8<<10 {
		t.Fatalf("cache %+v: want hits within 8 KiB", st)
	}
}

// The cache's metrics count a record's documents as misses the first time and hits the next,
// and a second registration is not an error.
func TestDocumentCacheMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if err := RegisterMetrics(reg); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (hits, misses, bytes float64) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch {
				case mf.GetName() == "ragwatch_builtin_document_cache_bytes":
					bytes = m.GetGauge().GetValue()
				case m.GetLabel()[0].GetValue() == "hit":
					hits = m.GetCounter().GetValue()
				case m.GetLabel()[0].GetValue() == "miss":
					misses = m.GetCounter().GetValue()
				}
			}
		}
		return hits, misses, bytes
	}
	r := benchRecord()
	for k := range r.Documents { // content no other test indexed
		r.Documents[k].Content = fmt.Sprintf("Metrics test %d. %s", k, r.Documents[k].Content)
	}
	h0, m0, _ := read()
	s := New(Options{Metrics: []string{score.Faithfulness}})
	if _, err := s.Score(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	h1, m1, b1 := read()
	if _, err := s.Score(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	h2, m2, _ := read()
	n := float64(len(r.Documents))
	if m1-m0 != n || h1 != h0 || h2-h1 != n || m2 != m1 || b1 <= 0 {
		t.Fatalf("misses %v→%v→%v, hits %v→%v→%v, bytes %v; want %v misses then %v hits", m0, m1, m2, h0, h1, h2, b1, n, n)
	}
}
