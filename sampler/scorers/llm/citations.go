package llm

import (
	"context"
	"fmt"
	"strings"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/text"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// ---- citations (ALCE style) ----

// Statement is one statement of the answer with the documents it cites (none when uncited).
type Statement struct {
	Text        string
	DocumentIDs []string
}

// Statements returns the answer's statements for the citation metrics: the record's citations
// (explicit, or parsed from markers), then every other sentence (internal/text) of three words
// or more, uncited. The NLI scorer uses the same statements.
func Statements(r *record.Record) []Statement {
	var out []Statement
	var cited []string
	for _, c := range r.Citations {
		t := normText(c.Text)
		if t == "" {
			continue
		}
		out = append(out, Statement{Text: c.Text, DocumentIDs: c.DocumentIDs})
		cited = append(cited, t)
	}
	for _, sent := range text.Sentences(r.Answer) {
		n := normText(sent)
		if n == "" || len(strings.Fields(n)) < 3 {
			continue
		}
		covered := false
		for _, c := range cited {
			if strings.Contains(n, c) || strings.Contains(c, n) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, Statement{Text: sent})
		}
	}
	return out
}

// normText lower-cases, drops bracketed markers and punctuation, and joins words by one space.
func normText(s string) string {
	var b strings.Builder
	depth := 0
	for _, c := range strings.ToLower(s) {
		switch {
		case c == '[':
			depth++
		case c == ']':
			if depth > 0 {
				depth--
			}
		case depth > 0:
		case c == ' ' || c == '\n' || c == '\t' || strings.ContainsRune(".,;:!?\"'()", c):
			b.WriteByte(' ')
		default:
			b.WriteRune(c)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

type citationPair struct {
	statement int
	docID     string
	content   string
	found     bool
}

// CitationScore computes citation_precision or citation_recall from per-pair support: pairStmt[i]
// is the statement index of (statement, cited document) pair i and supports[i] whether that
// document supports it. Precision is supporting pairs over pairs; recall is statements with at
// least one supporting citation over all statements. ok is false when the metric is undefined
// (precision without citations, recall without statements).
func CitationScore(metric string, statements int, pairStmt []int, supports []bool) (value float64, explanation string, ok bool) {
	if statements == 0 || (metric == score.CitationPrecision && len(pairStmt) == 0) {
		return 0, "", false
	}
	pairs := make([]citationPair, len(pairStmt))
	for i, st := range pairStmt {
		pairs[i].statement = st
	}
	v := citationScores(metric, statements, pairs, supports)
	return v.value, v.explanation, true
}

func (s *Scorer) citation(ctx context.Context, metric string, r *record.Record, u *call, st *recordState) (verdict, error) {
	if strings.TrimSpace(r.Answer) == "" || len(r.Documents) == 0 {
		return verdict{skip: true}, nil
	}
	stmts := Statements(r)
	var pairs []citationPair
	for i, st := range stmts {
		for _, id := range st.DocumentIDs {
			p := citationPair{statement: i, docID: id}
			for _, d := range r.Documents {
				if d.ID == id {
					p.content, p.found = d.Content, true
					break
				}
			}
			pairs = append(pairs, p)
		}
	}
	if len(pairs) > 50 {
		pairs = pairs[:50]
	}
	switch {
	case metric == score.CitationPrecision && len(pairs) == 0:
		return verdict{skip: true}, nil // no citations: precision is undefined
	case len(stmts) == 0:
		return verdict{skip: true}, nil
	}
	if !st.citeDone {
		st.supports, st.citeErr = s.supportPairs(ctx, u, stmts, pairs)
		st.citeDone = true
	}
	if st.citeErr != nil {
		return verdict{}, st.citeErr
	}
	return citationScores(metric, len(stmts), pairs, st.supports), nil
}

// citationScores computes citation precision (supporting (statement, document) pairs over all
// pairs) or recall (statements with at least one supporting citation over all statements).
func citationScores(metric string, statements int, pairs []citationPair, supports []bool) verdict {
	if metric == score.CitationPrecision {
		n := 0
		for _, ok := range supports {
			if ok {
				n++
			}
		}
		return verdict{value: float64(n) / float64(len(pairs)),
			explanation: fmt.Sprintf("%d of %d citations support their claim", n, len(pairs))}
	}
	ok := make([]bool, statements)
	for i, p := range pairs {
		if supports[i] {
			ok[p.statement] = true
		}
	}
	n := 0
	for _, b := range ok {
		if b {
			n++
		}
	}
	return verdict{value: float64(n) / float64(statements),
		explanation: fmt.Sprintf("%d of %d statements have a supporting citation", n, statements)}
}

func (s *Scorer) supportPairs(ctx context.Context, u *call, stmts []Statement, pairs []citationPair) ([]bool, error) {
	supports := make([]bool, len(pairs))
	var ask []int // pairs whose cited document exists
	var b strings.Builder
	for i, p := range pairs {
		if !p.found {
			continue // citing a document that was not retrieved supports nothing
		}
		k := len(ask)
		ask = append(ask, i)
		b.WriteString(block("CLAIM", fmt.Sprintf("index=%d", k), stmts[p.statement].Text))
		b.WriteString(block("PASSAGE", fmt.Sprintf("index=%d id=%q", k, Neutralize(truncate.String(p.docID, 128))), s.cut(p.content)))
	}
	if len(ask) == 0 {
		return supports, nil
	}
	var resp struct {
		Verdicts []indexed `json:"verdicts"`
	}
	err := s.ask(ctx, u, Question{Metric: "citation_precision_recall",
		System: "You check whether a cited passage supports the claim it is cited for. " + dataRules,
		User: b.String() + "For each index, decide whether the PASSAGE with that index, on its own, states or directly implies " +
			`the CLAIM with the same index: "supported" or "unsupported". Reply as {"verdicts": [{"index": 0, "verdict": "supported", "reason": "short"}, ...]} ` +
			"with one verdict per index (0 to " + fmt.Sprint(len(ask)-1) + ").",
		Schema: verdictsSchema(len(ask), enum("supported", "unsupported")),
		Check:  func() error { return checkIndexes(resp.Verdicts, len(ask)) },
	}, &resp)
	if err != nil {
		return nil, err
	}
	for _, v := range resp.Verdicts {
		supports[ask[v.Index]] = v.Verdict == "supported"
	}
	return supports, nil
}
