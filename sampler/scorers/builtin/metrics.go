package builtin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/text"
)

// DefaultThreshold is the support a claim needs to count as supported, and the faithfulness
// below which the quality command counts an answer as hallucinated.
const DefaultThreshold = 0.5

// MetricNames lists every metric the builtin scorer can produce, in the order it reports them.
var MetricNames = []string{
	score.Faithfulness, score.AnswerRelevancy, score.ContextPrecision, score.ContextRecall,
	score.CitationPrecision, score.CitationRecall, score.AnswerSimilarity,
}

// judge holds what the metrics of one record share: the context index and the threshold.
type judge struct {
	docs      []record.Document
	ix        *index
	threshold float64
	byID      map[string]int
	toks      map[string][]token // claim → tokens, so a claim judged against several documents is tokenized once
	split     map[string]splitText
}

// support is the support of claim by docs (nil: all documents).
func (j *judge) support(claim string, docs map[int]bool) (float64, string) {
	return j.index().support(j.tokens(claim), docs)
}

// tokens tokenizes a claim once per record.
func (j *judge) tokens(claim string) []token {
	t, ok := j.toks[claim]
	if !ok {
		if j.toks == nil {
			j.toks = map[string][]token{}
		}
		t = tokenize(claim)
		j.toks[claim] = t
	}
	return t
}

func newJudge(docs []record.Document, threshold float64) *judge {
	j := &judge{docs: docs, threshold: threshold, byID: make(map[string]int, len(docs))}
	for i := range docs {
		if _, dup := j.byID[docs[i].ID]; !dup {
			j.byID[docs[i].ID] = i
		}
	}
	return j
}

// index builds the context index on first use.
func (j *judge) index() *index {
	if j.ix == nil {
		j.ix = newIndex(j.docs)
	}
	return j.ix
}

// release returns the judge's index to the pool: nothing may use the judge afterwards.
func (j *judge) release() {
	if j.ix != nil {
		j.ix.release()
		j.ix = nil
	}
}

func (j *judge) isID(s string) bool { _, ok := j.byID[s]; return ok }

// claims splits text into at most maxClaims claims, citation markers removed.
func (j *judge) claims(text string) []string {
	c, _ := j.countedClaims(text)
	return c
}

// countedClaims is claims, and how many claims the text held before the cap. The answer is
// split once per record however many metrics ask.
func (j *judge) countedClaims(text string) ([]string, int) {
	if c, ok := j.split[text]; ok {
		return c.claims, c.all
	}
	c := SplitClaims(stripMarkers(text, j.isID))
	out := splitText{claims: c[:min(len(c), maxClaims)], all: len(c)}
	if j.split == nil {
		j.split = map[string]splitText{}
	}
	j.split[text] = out
	return out.claims, out.all
}

type splitText struct {
	claims []string
	all    int
}

// ClaimSupports splits answer into claims (citation markers removed) and returns each claim
// with its support by docs in [0, 1].
func ClaimSupports(answer string, docs []record.Document) (claims []string, support []float64) {
	j := newJudge(docs, DefaultThreshold)
	defer j.release()
	claims = j.claims(answer)
	support = make([]float64, len(claims))
	for i, c := range claims {
		support[i], _ = j.support(c, nil)
	}
	return claims, support
}

// Faithfulness is the mean support of the weakest quarter of the answer's claims (at least one
// claim; the weakest claim itself for answers of up to four claims): an answer is only as
// faithful as its least supported part, and averaging over the weakest quarter rather than
// taking the minimum keeps one paraphrased claim from deciding alone. docs/scorer-quality.md
// says how the quarter was chosen. ok is false when it cannot be judged: no document content,
// or no claim with a content word in the answer.
func Faithfulness(answer string, docs []record.Document) (value float64, explanation string, ok bool) {
	j := newJudge(docs, DefaultThreshold)
	defer j.release()
	return j.faithfulness(answer)
}

func (j *judge) faithfulness(answer string) (float64, string, bool) {
	if !hasDocContent(j.docs) {
		return 0, "", false
	}
	claims, all := j.countedClaims(answer)
	if len(claims) == 0 {
		return 0, "", false
	}
	supports := make([]float64, len(claims))
	supported := 0
	reasons := map[string]int{}
	for i, c := range claims {
		s, why := j.support(c, nil)
		supports[i] = s
		if s >= j.threshold {
			supported++
		} else if why != "" {
			reasons[why]++
		}
	}
	return weakestQuarter(supports), explainClaims(supported, len(claims), all, reasons), true
}

// explainClaims is faithfulness's explanation: supported of n claims judged (of all in the
// text), and the most common reason a claim fell short.
func explainClaims(supported, n, all int, reasons map[string]int) string {
	why := fmt.Sprintf("%d/%d claims supported%s", supported, n, reasonText(reasons))
	if all > n {
		why += fmt.Sprintf("; judged the first %d of %d claims", n, all)
	}
	return why
}

// weakestQuarter is the mean of the lowest ⌈n/4⌉ of the n supports (n > 0); it sorts supports.
func weakestQuarter(supports []float64) float64 {
	slices.Sort(supports)
	k := (len(supports) + 3) / 4
	sum := 0.0
	for _, v := range supports[:k] {
		sum += v
	}
	return sum / float64(k)
}

// AnswerRelevancy is the share of the question's content terms, weighted by their inverse
// frequency in the context, that the answer takes up, times 0.5 when the question asks for a
// number or a time (how many, when) or a name (who) and the answer holds none. An answer claim
// that a passage supports brings that passage's terms along, so a terse grounded answer
// ("Paris." to "What is the capital of France?" with "Paris is the capital of France" retrieved)
// counts as addressing the question. A refusal ("I don't know", "the context does not say":
// text.IsRefusal) scores 1 when the context does not support an answer and 0 when it does
// (conversation.go). ok is false without a question with content words or without an answer.
func AnswerRelevancy(query, answer string, docs []record.Document) (value float64, explanation string, ok bool) {
	j := newJudge(docs, DefaultThreshold)
	defer j.release()
	return j.answerRelevancy(query, answer)
}

func (j *judge) answerRelevancy(query, answer string) (float64, string, bool) {
	if strings.TrimSpace(answer) == "" {
		return 0, "", false
	}
	type qterm struct {
		stem   string
		weight float64
	}
	var terms []qterm
	seen := map[string]bool{}
	ix := j.index()
	for t := range eachToken(query) {
		if (t.stop && !t.num) || t.meta || formWords[t.norm] || seen[t.stem] {
			continue
		}
		seen[t.stem] = true
		w := ix.novel
		if id, ok := ix.vocab[t.stem]; ok {
			w = ix.idf[id]
		}
		terms = append(terms, qterm{t.stem, w})
	}
	if len(terms) == 0 {
		return 0, "", false
	}
	if text.IsRefusal(answer) {
		return j.refusalRelevancy(query)
	}
	inAnswer := map[string]bool{}
	hasNum, hasName := false, false
	for t := range eachToken(stripMarkers(answer, j.isID)) {
		inAnswer[t.stem] = true
		hasNum = hasNum || t.num || months[t.norm]
		hasName = hasName || t.cap
	}
	var grounded map[int32]bool // terms of the passages that support an answer claim
	if hasDocContent(j.docs) {
		for _, c := range j.claims(answer) {
			if s, _, w := ix.supportWindow(j.tokens(c), nil, nil); s >= j.threshold && w >= 0 {
				if grounded == nil {
					grounded = map[int32]bool{}
				}
				for _, id := range ix.windows[w].terms {
					grounded[id] = true
				}
			}
		}
	}
	total, hit := 0.0, 0.0
	n, viaPassage := 0, 0
	for _, q := range terms {
		total += q.weight
		if inAnswer[q.stem] {
			hit += q.weight
			n++
		} else if id, known := ix.vocab[q.stem]; known && grounded[id] {
			hit += q.weight
			n++
			viaPassage++
		}
	}
	v := hit / total
	why := fmt.Sprintf("answer covers %d/%d question terms", n, len(terms))
	if viaPassage > 0 {
		why += fmt.Sprintf(" (%d through its supporting passages)", viaPassage)
	}
	switch expected := expectedType(query); {
	case expected == "number" && !hasNum:
		v *= 0.5
		why += "; no number or date for a how-many/when question"
	case expected == "name" && !hasName:
		v *= 0.5
		why += "; no name for a who question"
	}
	return v, why, true
}

// expectedType is the kind of answer a question asks for: "number" (how many, how much, when,
// what year), "name" (who, whom), or "".
func expectedType(query string) string {
	q := " " + strings.Join(words(query), " ") + " "
	switch {
	case strings.Contains(q, " how many ") || strings.Contains(q, " how much ") ||
		strings.Contains(q, " when ") || strings.Contains(q, " what year ") ||
		strings.Contains(q, " how old ") || strings.Contains(q, " how long "):
		return "number"
	case strings.HasPrefix(q, " who ") || strings.Contains(q, " whom "):
		return "name"
	}
	return ""
}

var months = set("january", "february", "march", "april", "may", "june", "july", "august",
	"september", "october", "november", "december", "yesterday", "today", "tomorrow")

// ContextPrecision is the mean of precision@k over the ranks k that hold a relevant document
// (average precision over the returned list), 0 when none is relevant. Relevance comes from
// labels (grade ≥ 1) when the record has any; otherwise a document is relevant when it alone
// supports at least one claim of the reference (or of the answer, without a reference). ok is
// false without documents, or without labels and both reference and answer.
func ContextPrecision(docs []record.Document, relevance map[string]int, answer, reference string) (value float64, explanation string, ok bool) {
	j := newJudge(docs, DefaultThreshold)
	defer j.release()
	return j.contextPrecision(relevance, answer, reference)
}

func (j *judge) contextPrecision(relevance map[string]int, answer, reference string) (float64, string, bool) {
	if len(j.docs) == 0 {
		return 0, "", false
	}
	rel := make([]bool, len(j.docs))
	source := "labels"
	if len(relevance) > 0 {
		for i, d := range j.docs {
			rel[i] = relevance[d.ID] >= 1
		}
	} else {
		target := reference
		source = "reference"
		if strings.TrimSpace(target) == "" {
			target, source = answer, "answer"
		}
		if !hasDocContent(j.docs) {
			return 0, "", false
		}
		claims := j.claims(target)
		if len(claims) == 0 {
			return 0, "", false
		}
		for i := range j.docs {
			only := map[int]bool{i: true}
			for _, c := range claims {
				if s, _ := j.support(c, only); s >= j.threshold {
					rel[i] = true
					break
				}
			}
		}
	}
	hits, sum := 0, 0.0
	var ranks []string
	for k, r := range rel {
		if r {
			hits++
			sum += float64(hits) / float64(k+1)
			if len(ranks) < 10 {
				ranks = append(ranks, strconv.Itoa(k+1))
			}
		}
	}
	if hits == 0 {
		return 0, fmt.Sprintf("no relevant document among %d (by %s)", len(rel), source), true
	}
	return sum / float64(hits), fmt.Sprintf("relevant at ranks %s of %d (by %s)", strings.Join(ranks, ","), len(rel), source), true
}

// ContextRecall is the share of the reference's claims supported by the documents. ok is false
// without a reference claim or without document content.
func ContextRecall(reference string, docs []record.Document) (value float64, explanation string, ok bool) {
	j := newJudge(docs, DefaultThreshold)
	defer j.release()
	return j.contextRecall(reference)
}

func (j *judge) contextRecall(reference string) (float64, string, bool) {
	if strings.TrimSpace(reference) == "" || !hasDocContent(j.docs) {
		return 0, "", false
	}
	claims := j.claims(reference)
	if len(claims) == 0 {
		return 0, "", false
	}
	n := 0
	for _, c := range claims {
		if s, _ := j.support(c, nil); s >= j.threshold {
			n++
		}
	}
	return float64(n) / float64(len(claims)), fmt.Sprintf("%d/%d reference claims found in context", n, len(claims)), true
}

// CitationPrecision is, over every (claim, cited document) pair of the citations, the share of
// citations that are precise (ALCE): the cited document alone supports the claim, or the claim is
// supported by all its cited documents together but not without this one. "Supports" is the
// learned citation decision (CitationModel, learned.go), not the support threshold. A citation of an
// unknown document is imprecise. ok is false without citations or without document content.
func CitationPrecision(citations []record.Citation, docs []record.Document) (value float64, explanation string, ok bool) {
	j := newJudge(docs, DefaultThreshold)
	defer j.release()
	return j.citationPrecision(citations)
}

func (j *judge) citationPrecision(citations []record.Citation) (float64, string, bool) {
	if len(citations) == 0 || !hasDocContent(j.docs) {
		return 0, "", false
	}
	total, precise, unknown := 0, 0, 0
	var unknownIDs []string // the first few, for the explanation
	for _, c := range citations {
		claim := stripMarkers(c.Text, j.isID)
		cited := map[int]bool{}
		for _, id := range c.DocumentIDs {
			if i, ok := j.byID[id]; ok {
				cited[i] = true
			}
		}
		all := 0 // whether the cited documents together support the claim: 0 not known yet, 1 yes, -1 no
		for _, id := range c.DocumentIDs {
			total++
			i, ok := j.byID[id]
			if !ok {
				unknown++
				if len(unknownIDs) < maxNamed && !slices.Contains(unknownIDs, "["+id+"]") {
					unknownIDs = append(unknownIDs, "["+id+"]")
				}
				continue
			}
			if j.citationSupports(claim, map[int]bool{i: true}) {
				precise++
				continue
			}
			if len(cited) < 2 {
				continue
			}
			if all == 0 {
				all = -1
				if j.citationSupports(claim, cited) {
					all = 1
				}
			}
			if all < 0 {
				continue
			}
			rest := make(map[int]bool, len(cited))
			for k := range cited {
				if k != i {
					rest[k] = true
				}
			}
			if !j.citationSupports(claim, rest) {
				precise++ // needed together with the others
			}
		}
	}
	if total == 0 {
		return 0, "", false
	}
	why := fmt.Sprintf("%d/%d citations support their claim", precise, total)
	if unknown > 0 {
		why += fmt.Sprintf("; %d %s", unknown, namesNoDocument(unknownIDs, unknown == 1))
	}
	return float64(precise) / float64(total), why, true
}

// CitationRecall is the share of the answer's claims that have a citation whose cited documents,
// together, support the claim (ALCE; "support" is the learned citation decision). A claim belongs to a citation when one's text contains the
// other's. An answer that cites nothing scores 0 when it makes a claim (docs/metrics.md). ok is
// false without claims, or with citations but no document content to check them against.
func CitationRecall(answer string, citations []record.Citation, docs []record.Document) (value float64, explanation string, ok bool) {
	j := newJudge(docs, DefaultThreshold)
	defer j.release()
	return j.citationRecall(answer, citations)
}

func (j *judge) citationRecall(answer string, citations []record.Citation) (float64, string, bool) {
	if len(j.docs) == 0 {
		return 0, "", false // nothing retrieved, nothing to cite: not scored (docs/conversations.md)
	}
	unresolved := j.unresolvedMarkers(answer)
	if len(citations) == 0 {
		// No citation supports anything: every claim is uncited.
		if n := len(j.claims(answer)); n > 0 {
			if len(unresolved) > 0 { // it cites, but nothing that was retrieved: say so
				return 0, fmt.Sprintf("0/%d claims supported by their citations; the answer %s", n,
					namesNoDocument(unresolved, true)), true
			}
			return 0, fmt.Sprintf("0/%d claims supported by their citations; the answer cites nothing", n), true
		}
		return 0, "", false
	}
	if !hasDocContent(j.docs) {
		return 0, "", false
	}
	claims := j.claims(answer)
	if len(claims) == 0 {
		return 0, "", false
	}
	citTexts := make([]string, len(citations))
	for i, c := range citations {
		citTexts[i] = matchKey(stripMarkers(c.Text, j.isID))
	}
	supported, uncited := 0, 0
	for _, claim := range claims {
		key := matchKey(claim)
		cited := map[int]bool{}
		for i, c := range citations {
			if citTexts[i] == "" || !(strings.Contains(citTexts[i], key) || strings.Contains(key, citTexts[i])) {
				continue
			}
			for _, id := range c.DocumentIDs {
				if d, ok := j.byID[id]; ok {
					cited[d] = true
				}
			}
		}
		if len(cited) == 0 {
			uncited++
			continue
		}
		if j.citationSupports(claim, cited) {
			supported++
		}
	}
	why := fmt.Sprintf("%d/%d claims supported by their citations; %d without citation", supported, len(claims), uncited)
	if len(unresolved) > 0 {
		why += "; the answer " + namesNoDocument(unresolved, true)
	}
	return float64(supported) / float64(len(claims)), why, true
}

// maxNamed bounds the markers or ids an explanation names.
const maxNamed = 3

// namesNoDocument says that markers (as written, "[7]") name no retrieved document: "cites
// [7], which names no retrieved document" (one citing), "cite [7], [9], which name no
// retrieved document" (several).
func namesNoDocument(markers []string, one bool) string {
	verb, names := "cites", "names"
	if !one {
		verb = "cite"
	}
	if len(markers) > 1 {
		names = "name"
	}
	return fmt.Sprintf("%s %s, which %s no retrieved document", verb, strings.Join(markers, ", "), names)
}

// unresolvedMarkers lists, once each and at most maxNamed, the positions of the answer's
// citation markers that name no document ("[1]" with no documents, "[7]" with three): what
// record's citation parsing ignores, and what an explanation must not call citing nothing.
// Only numeric markers are taken: "[sic]" is no citation.
func (j *judge) unresolvedMarkers(answer string) []string {
	var out []string
	rest := answer
	for len(out) < maxNamed {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			break
		}
		end := strings.IndexByte(rest[open:], ']')
		if end < 0 {
			break
		}
		inner := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		if !isMarker(inner, j.isID) {
			continue
		}
		for _, p := range strings.Split(inner, ",") {
			p = strings.TrimSpace(p)
			if j.isID(p) {
				continue
			}
			if n, err := strconv.Atoi(p); err == nil && (n < 1 || n > len(j.docs)) {
				if m := "[" + p + "]"; len(out) < maxNamed && !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// matchKey normalises a claim for matching it with a citation's text.
func matchKey(s string) string { return strings.Join(words(s), " ") }

// AnswerSimilarity is the token-level F1 between answer and reference (SQuAD normalisation:
// lower case, punctuation and the articles a, an, the removed). ok is false without a
// reference.
func AnswerSimilarity(answer, reference string) (value float64, explanation string, ok bool) {
	ref := squadTokens(reference)
	if len(ref) == 0 {
		return 0, "", false
	}
	ans := squadTokens(answer)
	if len(ans) == 0 {
		return 0, "empty answer", true
	}
	count := map[string]int{}
	for _, t := range ref {
		count[t]++
	}
	common := 0
	for _, t := range ans {
		if count[t] > 0 {
			count[t]--
			common++
		}
	}
	if common == 0 {
		return 0, "no token in common with the reference", true
	}
	p := float64(common) / float64(len(ans))
	r := float64(common) / float64(len(ref))
	return 2 * p * r / (p + r), fmt.Sprintf("token F1: precision %.2f, recall %.2f", p, r), true
}

func squadTokens(s string) []string {
	var out []string
	for _, w := range words(s) {
		if w != "a" && w != "an" && w != "the" {
			out = append(out, w)
		}
	}
	return out
}

// WordOverlap is the naive baseline the quality command reports next to faithfulness: the share
// of the answer's distinct lower-cased words that occur in the documents. It is not a metric.
func WordOverlap(answer string, docs []record.Document) float64 {
	ctx := map[string]bool{}
	for _, d := range docs {
		for _, w := range words(d.Content) {
			ctx[w] = true
		}
	}
	seen := map[string]bool{}
	hit := 0
	for _, w := range words(answer) {
		if seen[w] {
			continue
		}
		seen[w] = true
		if ctx[w] {
			hit++
		}
	}
	if len(seen) == 0 {
		return 0
	}
	return float64(hit) / float64(len(seen))
}

// words splits s into lower-case runs of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !isWordRune(r) })
}

func reasonText(reasons map[string]int) string {
	best, n := "", 0
	for k, v := range reasons {
		if v > n || (v == n && k < best) {
			best, n = k, v
		}
	}
	if best == "" {
		return ""
	}
	return "; most common issue: " + best
}

func hasDocContent(docs []record.Document) bool {
	for i := range docs {
		if strings.TrimSpace(docs[i].Content) != "" {
			return true
		}
	}
	return false
}
