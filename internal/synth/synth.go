package synth

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Document is one retrieved passage of a turn.
type Document struct {
	ID      string
	Score   float64
	Content string
}

// Turn is one synthetic RAG request: what the app's instrumentation would report.
type Turn struct {
	TraceID   [16]byte
	Service   string
	Route     string
	SessionID string
	UserID    string
	Query     string
	Documents []Document
	Answer    string
	Model     string

	InputTokens  int
	OutputTokens int

	Start      time.Time
	Retrieval  time.Duration
	Generation time.Duration
	Total      time.Duration

	// Variant is the app variant that served the turn, reported as an OpenTelemetry
	// feature-flag evaluation event (feature_flag.result.variant) on the root span; "" reports
	// none.
	Variant string

	// Feedback is the user's thumbs (+1 / -1) or 0 when the user gave none.
	Feedback int
	// Degraded tells whether the turn was generated while the index was broken.
	Degraded bool
	// ExtraSpans is how many spans beyond the three basic ones (CHAIN, RETRIEVER, LLM) the
	// trace carries, as nested CHAIN spans real frameworks add around a turn.
	ExtraSpans int
	// NoRoot leaves the CHAIN root span out of AppendTraces: the children still name it as
	// their parent, so the trace never completes (a crashed app, a lost export). Emit ignores it.
	NoRoot bool
}

// Options shape the generated traffic.
type Options struct {
	Seed      uint64
	Service   string
	Documents int // documents per retrieval (default 5)
	DocBytes  int // size of each document's content (default about 1 KB)
	// FeedbackRate is the share of requests that get user feedback (default 0.2).
	FeedbackRate float64
	// Spans per trace, at least 3 (default 3).
	Spans int
	// NoRoot generates turns whose root span is never sent (see Turn.NoRoot).
	NoRoot bool
}

// Generator produces turns. It is safe for concurrent use.
type Generator struct {
	opts    Options
	mu      sync.Mutex // guards rng and degraded
	rng     *rand.Rand
	bad     bool
	content map[string]string
	ids     []string
}

// New returns a generator with its knowledge base built for opts.
func New(opts Options) *Generator {
	if opts.Service == "" {
		opts.Service = "support-bot"
	}
	if opts.Documents <= 0 {
		opts.Documents = 5
	}
	if opts.DocBytes <= 0 {
		opts.DocBytes = 1024
	}
	if opts.FeedbackRate == 0 {
		opts.FeedbackRate = 0.2
	}
	g := &Generator{
		opts:    opts,
		rng:     rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		content: make(map[string]string, len(corpus)),
	}
	for i, a := range corpus {
		g.ids = append(g.ids, a.id)
		g.content[a.id] = buildContent(a, i, opts.DocBytes)
	}
	return g
}

func buildContent(a article, seed, size int) string {
	var b strings.Builder
	b.WriteString(a.title)
	b.WriteString(". ")
	for _, f := range a.facts {
		b.WriteString(f.answer)
		b.WriteByte(' ')
	}
	for i := seed; b.Len() < size; i++ {
		b.WriteString(filler[i%len(filler)])
		b.WriteByte(' ')
	}
	s := b.String()
	if len(s) > size && size > 0 {
		// Cut at the last full sentence that fits, never inside a fact.
		min := len(a.title) + 2
		for _, f := range a.facts {
			min += len(f.answer) + 1
		}
		cut := size
		if cut < min {
			cut = min
		}
		if i := strings.LastIndexByte(s[:cut], '.'); i >= min-2 {
			s = s[:i+1]
		} else {
			s = s[:cut]
		}
	}
	return strings.TrimSpace(s)
}

// SetDegraded breaks (true) or repairs (false) the synthetic index.
func (g *Generator) SetDegraded(bad bool) {
	g.mu.Lock()
	g.bad = bad
	g.mu.Unlock()
}

// Degraded reports whether the index is broken.
func (g *Generator) Degraded() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.bad
}

// Next generates one turn starting at start.
func (g *Generator) Next(start time.Time) Turn {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.rng
	ai := r.IntN(len(corpus))
	a := corpus[ai]
	f := a.facts[r.IntN(len(a.facts))]

	t := Turn{
		Service:   g.opts.Service,
		Route:     []string{"faq", "faq", "billing", "howto"}[r.IntN(4)],
		SessionID: fmt.Sprintf("s-%d", r.IntN(500)),
		UserID:    fmt.Sprintf("u-%d", r.IntN(2000)),
		Query:     f.question,
		Model:     "gpt-4o-mini",
		Start:     start,
		Degraded:  g.bad,
		NoRoot:    g.opts.NoRoot,
	}
	if g.opts.Spans > 3 {
		t.ExtraSpans = g.opts.Spans - 3
	}
	for i := range t.TraceID {
		t.TraceID[i] = byte(r.Uint32())
	}
	n := g.opts.Documents
	if g.bad {
		// A broken index: unrelated documents with low similarity; the model still answers
		// from its own memory and cites the first document, which does not say so.
		for _, id := range g.pick(n, a.id) {
			t.Documents = append(t.Documents, Document{ID: id, Score: 0.12 + 0.25*r.Float64(), Content: g.content[id]})
		}
		sortByScore(t.Documents)
		t.Answer = f.answer[:len(f.answer)-1] + " [1]."
	} else {
		t.Documents = append(t.Documents, Document{ID: a.id, Score: 0.82 + 0.15*r.Float64(), Content: g.content[a.id]})
		for _, id := range g.pick(n-1, a.id) {
			t.Documents = append(t.Documents, Document{ID: id, Score: 0.45 + 0.3*r.Float64(), Content: g.content[id]})
		}
		sortByScore(t.Documents)
		pos := 0
		for i, d := range t.Documents {
			if d.ID == a.id {
				pos = i + 1
			}
		}
		t.Answer = fmt.Sprintf("%s [%d].", f.answer[:len(f.answer)-1], pos)
	}
	t.InputTokens = 120 + len(t.Documents)*g.opts.DocBytes/4
	t.OutputTokens = len(strings.Fields(t.Answer)) * 4 / 3
	t.Retrieval = time.Duration(20+r.IntN(40)) * time.Millisecond
	t.Generation = time.Duration(400+r.IntN(600)) * time.Millisecond
	t.Total = t.Retrieval + t.Generation + time.Duration(5+r.IntN(10))*time.Millisecond

	if r.Float64() < g.opts.FeedbackRate {
		negative := 0.08
		if g.bad {
			negative = 0.7
		}
		t.Feedback = 1
		if r.Float64() < negative {
			t.Feedback = -1
		}
	}
	return t
}

// pick returns n distinct document ids other than exclude.
func (g *Generator) pick(n int, exclude string) []string {
	out := make([]string, 0, n)
	for _, i := range g.rng.Perm(len(g.ids)) {
		if len(out) == n {
			break
		}
		if g.ids[i] != exclude {
			out = append(out, g.ids[i])
		}
	}
	return out
}

func sortByScore(docs []Document) {
	for i := 1; i < len(docs); i++ {
		for j := i; j > 0 && docs[j].Score > docs[j-1].Score; j-- {
			docs[j], docs[j-1] = docs[j-1], docs[j]
		}
	}
}
