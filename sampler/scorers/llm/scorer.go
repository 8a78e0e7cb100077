package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/text"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// MetricNames lists every metric a judge can score, in scoring order.
var MetricNames = []string{score.Faithfulness, score.AnswerRelevancy, score.ContextPrecision, score.ContextRecall, score.CitationPrecision,
	score.CitationRecall, score.AnswerSimilarity, score.RubricRelevance, score.RubricCompleteness, score.RubricAccuracy, score.RubricCitationQuality}

// ScorerOptions configures a Scorer.
type ScorerOptions struct {
	Metrics  []string // enabled metrics; empty enables all of MetricNames
	Embedder Embedder // optional: answer_relevancy and answer_similarity by embedding cosine
	// MaxDocuments and MaxTextBytes bound what goes into one prompt (defaults 20 and 8000).
	MaxDocuments int
	MaxTextBytes int
	Now          func() time.Time
}

// Scorer scores records with an LLM judge.
type Scorer struct {
	j       *Judge
	metrics []string
	embed   Embedder
	maxDocs int
	maxText int
	now     func() time.Time
}

var _ score.Scorer = (*Scorer)(nil)

// NewScorer returns a Scorer asking j. Unknown metric names are an error.
func NewScorer(j *Judge, o ScorerOptions) (*Scorer, error) {
	ms := o.Metrics
	if len(ms) == 0 {
		ms = MetricNames
	}
	for _, m := range ms {
		if !slices.Contains(MetricNames, m) {
			return nil, fmt.Errorf("llm judge cannot score metric %q", m)
		}
	}
	s := &Scorer{j: j, metrics: ms, embed: o.Embedder, maxDocs: o.MaxDocuments, maxText: o.MaxTextBytes, now: o.Now}
	if s.maxDocs <= 0 {
		s.maxDocs = 20
	}
	if s.maxText <= 0 {
		s.maxText = 8000
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Name implements score.Scorer: the backend's name.
func (s *Scorer) Name() string { return s.j.b.Name() }

// verdict is one metric's outcome before it becomes a Result.
type verdict struct {
	value       float64
	explanation string
	skip        bool // the record lacks what the metric needs: no result, no error
}

// Score implements score.Scorer. Metrics the record cannot support (no reference, no
// documents, no citations) are left out; failed metrics come back in a score.Failure. Once a
// question fails with the backend unavailable (its retries spent on 429, 5xx, network errors
// or timeouts), the record's remaining metrics are not asked: they fail with the same outcome.
func (s *Scorer) Score(ctx context.Context, r *record.Record) ([]score.Result, error) {
	var out []score.Result
	var failed score.Failure
	st := &recordState{}
	for _, m := range s.metrics {
		u := &call{st: st}
		v, err := s.scoreMetric(ctx, m, r, u, st)
		if err != nil {
			failed = append(failed, score.MetricError{Metric: m, Outcome: Outcome(err), Err: err})
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if v.skip {
			continue
		}
		if math.IsNaN(v.value) || v.value < 0 || v.value > 1 {
			failed = append(failed, score.MetricError{Metric: m, Outcome: score.OutcomeError,
				Err: fmt.Errorf("computed value %v outside [0, 1]", v.value)})
			continue
		}
		out = append(out, score.Result{
			TraceID: r.TraceID, SpanID: r.SpanID, Service: r.Service, Metric: m, Value: v.value,
			Weight: weight(r), Scorer: s.j.b.Name(), Model: s.j.b.Model(),
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD,
			Explanation: v.explanation, Time: s.now(),
		})
	}
	if len(failed) > 0 {
		return out, failed
	}
	return out, nil
}

func weight(r *record.Record) float64 {
	if r.Sampling != nil && r.Sampling.Probability > 0 {
		return 1 / r.Sampling.Probability
	}
	return 1
}

// recordState holds judge answers shared by several metrics of one record: citation precision
// and recall ask the same question once (its tokens are charged to the first of them).
type recordState struct {
	citeDone bool
	supports []bool
	citeErr  error
	// down is set once a question failed with the backend unavailable (OutcomeError.Unavailable):
	// the record's later questions are not sent and fail with it. A failed attempt's results are
	// thrown away (the worker scores the whole record again after its backoff), so asking the
	// other metrics of a failing judge only costs calls, and with a slow judge holds the worker
	// for every metric's retries instead of one's.
	down *OutcomeError
}

// call is what one metric's questions share: the usage they add up and the record's state.
type call struct {
	Usage
	st *recordState
}

// notAsked is the error for a question not sent because the backend was unavailable for an
// earlier one of the record, nil while it is not.
func (u *call) notAsked() error {
	d := u.st.down
	if d == nil {
		return nil
	}
	return &OutcomeError{Outcome: d.Outcome, Unavailable: true,
		Err: fmt.Errorf("not asked, the judge was unavailable for an earlier metric: %w", d.Err)}
}

func (s *Scorer) scoreMetric(ctx context.Context, m string, r *record.Record, u *call, st *recordState) (verdict, error) {
	switch m {
	case score.Faithfulness:
		return s.faithfulness(ctx, r, u)
	case score.AnswerRelevancy:
		return s.answerRelevancy(ctx, r, u)
	case score.ContextPrecision:
		return s.contextPrecision(ctx, r, u)
	case score.ContextRecall:
		return s.contextRecall(ctx, r, u)
	case score.CitationPrecision, score.CitationRecall:
		return s.citation(ctx, m, r, u, st)
	case score.AnswerSimilarity:
		return s.answerSimilarity(ctx, r, u)
	default:
		return s.rubric(ctx, m, r, u)
	}
}

// ask is Judge.Ask adding usage into u; once the backend was unavailable for the record it
// asks nothing and returns that failure.
func (s *Scorer) ask(ctx context.Context, u *call, q Question, out any) error {
	if err := u.notAsked(); err != nil {
		return err
	}
	used, err := s.j.Ask(ctx, q, out)
	u.add(used)
	var oe *OutcomeError
	if errors.As(err, &oe) && oe.Unavailable {
		u.st.down = oe
	}
	return err
}

func (s *Scorer) cut(text string) string {
	if len(text) <= s.maxText {
		return text
	}
	i := s.maxText
	for i > 0 && !utf8.RuneStart(text[i]) {
		i--
	}
	return text[:i] + " [truncated]"
}

func (s *Scorer) docs(r *record.Record) []record.Document {
	d := r.Documents
	if len(d) > s.maxDocs {
		d = d[:s.maxDocs]
	}
	return d
}

func (s *Scorer) docBlocks(docs []record.Document) string {
	var b strings.Builder
	for i, d := range docs {
		b.WriteString(block("DOCUMENT", docAttrs(i, d.ID), s.cut(d.Content)))
	}
	return b.String()
}

// ---- faithfulness (RAGAS): split the answer into claims, verify each against the context ----

var claimsSchema = object(map[string]any{"claims": arrayOf(str(), 0, 30)})

func verdictsSchema(n int, verdict map[string]any) Schema {
	return object(map[string]any{"verdicts": arrayOf(map[string]any(object(map[string]any{
		"index":   integer(0, n-1),
		"verdict": verdict,
		"reason":  str(),
	})), n, n)})
}

// indexed is one verdict of a list answered per item.
type indexed struct {
	Index   int    `json:"index"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	Useful  bool   `json:"useful"`
}

// checkIndexes requires every index 0..n-1 exactly once.
func checkIndexes(vs []indexed, n int) error {
	seen := make([]bool, n)
	for _, v := range vs {
		if v.Index < 0 || v.Index >= n {
			return fmt.Errorf("index %d out of range", v.Index)
		}
		if seen[v.Index] {
			return fmt.Errorf("index %d given twice", v.Index)
		}
		seen[v.Index] = true
	}
	if len(vs) != n {
		return fmt.Errorf("%d verdicts for %d items", len(vs), n)
	}
	return nil
}

func (s *Scorer) claims(ctx context.Context, u *call, metric, question, answer string) ([]string, error) {
	var split struct {
		Claims []string `json:"claims"`
	}
	err := s.ask(ctx, u, Question{Metric: metric,
		System: "You split an answer into its atomic factual claims. " + dataRules,
		User: block("QUESTION", "", s.cut(question)) + block("ANSWER", "", s.cut(answer)) +
			"List every factual claim the ANSWER makes, each as one short standalone sentence with pronouns resolved. " +
			"Leave out greetings, hedges, questions and statements about the answer itself. At most 30 claims. " +
			`Reply as {"claims": ["...", ...]}; an answer without factual claims gives {"claims": []}.`,
		Schema: claimsSchema}, &split)
	var out []string
	for _, c := range split.Claims {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out, err
}

func (s *Scorer) faithfulness(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	if strings.TrimSpace(r.Answer) == "" || len(r.Documents) == 0 {
		return verdict{skip: true}, nil
	}
	claims, err := s.claims(ctx, u, score.Faithfulness, r.Query, r.Answer)
	if err != nil {
		return verdict{}, err
	}
	if len(claims) == 0 {
		return verdict{skip: true}, nil
	}
	var claimBlocks strings.Builder
	for i, c := range claims {
		claimBlocks.WriteString(block("CLAIM", fmt.Sprintf("index=%d", i), c))
	}
	var resp struct {
		Verdicts []indexed `json:"verdicts"`
	}
	err = s.ask(ctx, u, Question{Metric: score.Faithfulness,
		System: "You check whether claims are supported by retrieved documents, like a careful fact checker. " + dataRules,
		User: s.docBlocks(s.docs(r)) + claimBlocks.String() +
			"For each CLAIM decide, using only the DOCUMENTs and no outside knowledge: " +
			`"supported" when the documents state or directly imply it, "contradicted" when they say otherwise, ` +
			`"unsupported" when they do not say. Give one verdict per claim index (0 to ` + fmt.Sprint(len(claims)-1) + `) ` +
			`as {"verdicts": [{"index": 0, "verdict": "supported", "reason": "short"}, ...]}.`,
		Schema: verdictsSchema(len(claims), enum("supported", "unsupported", "contradicted")),
		Check:  func() error { return checkIndexes(resp.Verdicts, len(claims)) },
	}, &resp)
	if err != nil {
		return verdict{}, err
	}
	supported, contradicted := 0, 0
	for _, v := range resp.Verdicts {
		switch v.Verdict {
		case "supported":
			supported++
		case "contradicted":
			contradicted++
		}
	}
	return verdict{value: float64(supported) / float64(len(claims)),
		explanation: fmt.Sprintf("%d of %d claims supported, %d contradicted", supported, len(claims), contradicted)}, nil
}

// ---- answer relevancy ----

var questionsSchema = object(map[string]any{"questions": arrayOf(str(), 1, 5), "noncommittal": boolean()})

func ratingSchema() Schema {
	return object(map[string]any{"reasoning": str(), "score": integer(1, 5)})
}

type rating struct {
	Reasoning string `json:"reasoning"`
	Score     int    `json:"score"`
}

func (s *Scorer) answerRelevancy(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	if strings.TrimSpace(r.Query) == "" || strings.TrimSpace(r.Answer) == "" {
		return verdict{skip: true}, nil
	}
	if s.embed == nil {
		return s.rate(ctx, u, score.AnswerRelevancy, "how directly and fully the ANSWER addresses the QUESTION",
			rubricRelevancy, block("QUESTION", "", s.cut(r.Query))+block("ANSWER", "", s.cut(r.Answer)))
	}
	// RAGAS: generate the questions the answer answers, compare them with the real one.
	var gen struct {
		Questions    []string `json:"questions"`
		Noncommittal bool     `json:"noncommittal"`
	}
	err := s.ask(ctx, u, Question{Metric: score.AnswerRelevancy,
		System: "You infer which question an answer was written for. " + dataRules,
		User: block("ANSWER", "", s.cut(r.Answer)) +
			"Write 3 different questions that the ANSWER answers. Set noncommittal to true when the answer is evasive, " +
			`vague or says it does not know. Reply as {"questions": ["...", "...", "..."], "noncommittal": false}.`,
		Schema: questionsSchema}, &gen)
	if err != nil {
		return verdict{}, err
	}
	if gen.Noncommittal {
		return verdict{value: 0, explanation: "noncommittal answer"}, nil
	}
	vecs, tok, err := s.embed.Embed(ctx, append([]string{s.cut(r.Query)}, gen.Questions...))
	u.InputTokens += tok
	if err != nil {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("embeddings: %w", err)}
	}
	if len(vecs) != len(gen.Questions)+1 {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("embeddings: %d vectors for %d texts", len(vecs), len(gen.Questions)+1)}
	}
	sum := 0.0
	for _, v := range vecs[1:] {
		c, err := cosine(vecs[0], v)
		if err != nil {
			return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: err}
		}
		sum += c
	}
	mean := math.Max(0, sum/float64(len(gen.Questions)))
	return verdict{value: math.Min(1, mean),
		explanation: fmt.Sprintf("mean cosine of %d generated questions to the query", len(gen.Questions))}, nil
}

func cosine(a, b []float64) (float64, error) {
	if len(a) == 0 || len(a) != len(b) {
		return 0, fmt.Errorf("embeddings of different sizes (%d, %d)", len(a), len(b))
	}
	var dot, na, nb float64
	for i := range a {
		dot += a[i] * b[i]
		na += a[i] * a[i]
		nb += b[i] * b[i]
	}
	if na == 0 || nb == 0 {
		return 0, errors.New("zero embedding vector")
	}
	return dot / math.Sqrt(na*nb), nil
}

// ---- context precision and recall (RAGAS) ----

func (s *Scorer) contextPrecision(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	ground, groundName := r.Reference, "REFERENCE"
	if strings.TrimSpace(ground) == "" {
		ground, groundName = r.Answer, "ANSWER"
	}
	docs := s.docs(r)
	if strings.TrimSpace(r.Query) == "" || strings.TrimSpace(ground) == "" || len(docs) == 0 {
		return verdict{skip: true}, nil
	}
	var resp struct {
		Verdicts []indexed `json:"verdicts"`
	}
	schema := object(map[string]any{"verdicts": arrayOf(map[string]any(object(map[string]any{
		"index": integer(0, len(docs)-1), "useful": boolean(), "reason": str()})), len(docs), len(docs))})
	err := s.ask(ctx, u, Question{Metric: score.ContextPrecision,
		System: "You judge which retrieved documents were useful for answering a question. " + dataRules,
		User: block("QUESTION", "", s.cut(r.Query)) + block(groundName, "", s.cut(ground)) + s.docBlocks(docs) +
			"For each DOCUMENT decide whether it was useful in arriving at the " + groundName + " for the QUESTION. " +
			`Reply as {"verdicts": [{"index": 0, "useful": true, "reason": "short"}, ...]} with one verdict per document index (0 to ` +
			fmt.Sprint(len(docs)-1) + `).`,
		Schema: schema,
		Check:  func() error { return checkIndexes(resp.Verdicts, len(docs)) },
	}, &resp)
	if err != nil {
		return verdict{}, err
	}
	useful := make([]bool, len(docs))
	for _, v := range resp.Verdicts {
		useful[v.Index] = v.Useful
	}
	value, n := AveragePrecision(useful)
	return verdict{value: value, explanation: fmt.Sprintf("%d of %d documents useful", n, len(docs))}, nil
}

// AveragePrecision is RAGAS context precision: the mean of precision@k over the ranks k that
// hold a useful document (0 when none is useful). It also returns the useful count.
func AveragePrecision(useful []bool) (float64, int) {
	hits, sum := 0, 0.0
	for k, ok := range useful {
		if ok {
			hits++
			sum += float64(hits) / float64(k+1)
		}
	}
	if hits == 0 {
		return 0, 0
	}
	return sum / float64(hits), hits
}

func (s *Scorer) contextRecall(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	docs := s.docs(r)
	if strings.TrimSpace(r.Reference) == "" || len(docs) == 0 {
		return verdict{skip: true}, nil
	}
	var resp struct {
		Statements []struct {
			Statement  string `json:"statement"`
			Attributed bool   `json:"attributed"`
		} `json:"statements"`
	}
	schema := object(map[string]any{"statements": arrayOf(map[string]any(object(map[string]any{
		"statement": str(), "attributed": boolean()})), 1, 30)})
	err := s.ask(ctx, u, Question{Metric: score.ContextRecall,
		System: "You check whether a reference answer can be found in retrieved documents. " + dataRules,
		User: block("QUESTION", "", s.cut(r.Query)) + block("REFERENCE", "", s.cut(r.Reference)) + s.docBlocks(docs) +
			"Split the REFERENCE into its factual statements (at most 30) and, for each, decide whether the DOCUMENTs " +
			`support it. Reply as {"statements": [{"statement": "...", "attributed": true}, ...]}.`,
		Schema: schema}, &resp)
	if err != nil {
		return verdict{}, err
	}
	n := 0
	for _, st := range resp.Statements {
		if st.Attributed {
			n++
		}
	}
	return verdict{value: float64(n) / float64(len(resp.Statements)),
		explanation: fmt.Sprintf("%d of %d reference statements found in the context", n, len(resp.Statements))}, nil
}

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

// ---- answer similarity ----

func (s *Scorer) answerSimilarity(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	if strings.TrimSpace(r.Reference) == "" || strings.TrimSpace(r.Answer) == "" {
		return verdict{skip: true}, nil
	}
	if s.embed == nil {
		return s.rate(ctx, u, score.AnswerSimilarity, "how closely the ANSWER matches the meaning of the REFERENCE answer",
			rubricSimilarity, block("QUESTION", "", s.cut(r.Query))+block("REFERENCE", "", s.cut(r.Reference))+block("ANSWER", "", s.cut(r.Answer)))
	}
	if err := u.notAsked(); err != nil {
		return verdict{}, err
	}
	vecs, tok, err := s.embed.Embed(ctx, []string{s.cut(r.Answer), s.cut(r.Reference)})
	u.InputTokens += tok
	if err != nil {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("embeddings: %w", err)}
	}
	if len(vecs) != 2 {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("embeddings: %d vectors for 2 texts", len(vecs))}
	}
	c, err := cosine(vecs[0], vecs[1])
	if err != nil {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: err}
	}
	return verdict{value: math.Min(1, math.Max(0, c)), explanation: "embedding cosine of answer and reference"}, nil
}

// ---- rubrics (G-Eval style: criteria, steps, a 1..5 scale, normalised (s-1)/4) ----

const (
	rubricRelevancy = `5: answers exactly the question asked, nothing missing or off-topic.
4: answers the question with minor digressions or a small gap.
3: partly answers it; important parts missing or buried in unrelated text.
2: mostly off-topic; touches the question only in passing.
1: does not address the question, or refuses without reason.`
	rubricSimilarity = `5: same meaning as the reference; every key fact agrees.
4: same main point; a minor fact missing or added.
3: partly the same; some key facts missing or different.
2: mostly different; shares only a little with the reference.
1: unrelated to or contradicting the reference.`
)

var rubrics = map[string]struct{ criterion, scale, blocks string }{
	score.RubricRelevance: {"relevance: how well the ANSWER addresses the QUESTION", rubricRelevancy, "qa"},
	score.RubricCompleteness: {"completeness: whether the ANSWER covers every part of the QUESTION (and the key points of the REFERENCE when one is given)",
		`5: every part of the question answered with the necessary detail.
4: all main parts answered; a minor detail missing.
3: some parts answered, at least one important part missing.
2: only a small part of the question answered.
1: none of the question answered.`, "qar"},
	score.RubricAccuracy: {"accuracy: whether every statement in the ANSWER is correct according to the DOCUMENTs (and the REFERENCE when one is given)",
		`5: every statement correct and supported.
4: correct overall; one minor unsupported or imprecise detail.
3: a mix of correct statements and unsupported or wrong ones.
2: mostly unsupported or wrong.
1: wrong on the main point or contradicts the documents.`, "qadr"},
	score.RubricCitationQuality: {"citation quality: whether the ANSWER cites documents (markers like [1] or [doc-id]) for its factual statements and whether each cited document supports the statement it is attached to",
		`5: every factual statement cited, and every citation supports its statement.
4: nearly all statements cited correctly; one missing or weak citation.
3: some statements cited; several missing or unsupportive citations.
2: few citations, mostly missing or pointing to the wrong documents.
1: no citations, or citations that do not support the statements.`, "qad"},
}

func (s *Scorer) rubric(ctx context.Context, m string, r *record.Record, u *call) (verdict, error) {
	rb, ok := rubrics[m]
	if !ok {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("unknown metric %q", m)}
	}
	if strings.TrimSpace(r.Answer) == "" || strings.TrimSpace(r.Query) == "" {
		return verdict{skip: true}, nil
	}
	if strings.Contains(rb.blocks, "d") && len(r.Documents) == 0 {
		return verdict{skip: true}, nil
	}
	var b strings.Builder
	b.WriteString(block("QUESTION", "", s.cut(r.Query)))
	if strings.Contains(rb.blocks, "d") {
		b.WriteString(s.docBlocks(s.docs(r)))
	}
	if strings.Contains(rb.blocks, "r") && strings.TrimSpace(r.Reference) != "" {
		b.WriteString(block("REFERENCE", "", s.cut(r.Reference)))
	}
	b.WriteString(block("ANSWER", "", s.cut(r.Answer)))
	return s.rate(ctx, u, m, rb.criterion, rb.scale, b.String())
}

// rate asks for a 1..5 score with reasoning first (G-Eval's evaluation steps) and normalises it.
func (s *Scorer) rate(ctx context.Context, u *call, metric, criterion, scale, blocks string) (verdict, error) {
	var resp rating
	err := s.ask(ctx, u, Question{Metric: metric,
		System: "You are a strict evaluator of answers from a retrieval-augmented assistant. " + dataRules,
		User: blocks + "Evaluate " + criterion + ".\nSteps: read the QUESTION and the other blocks; list what a good answer needs; " +
			"compare the ANSWER with it; then pick the score whose description fits best.\nScale (integer 1 to 5):\n" + scale +
			"\n" + `Reply as {"reasoning": "two or three sentences", "score": 1-5}.`,
		Schema: ratingSchema()}, &resp)
	if err != nil {
		return verdict{}, err
	}
	return verdict{value: float64(resp.Score-1) / 4, explanation: fmt.Sprintf("judge score %d of 5", resp.Score)}, nil
}
