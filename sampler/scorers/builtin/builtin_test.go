package builtin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %.12f, want %.12f", name, got, want)
	}
}

func docs(contents ...string) []record.Document {
	var out []record.Document
	for i, c := range contents {
		out = append(out, record.Document{ID: "d" + string(rune('1'+i)), Content: c})
	}
	return out
}

func TestSplitClaims(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"abbreviations, titles and numbers",
			"Dr. Smith moved to the U.S. in 2001. He paid $3.5 million for a house. Prices rose 2.5% in Jan. and fell later.",
			[]string{"Dr. Smith moved to the U.S. in 2001.", "He paid $3.5 million for a house.", "Prices rose 2.5% in Jan. and fell later."}},
		{"ambiguous abbreviation ends a sentence before an opener",
			"Better support came from Acme Inc. The firm grew.",
			[]string{"Better support came from Acme Inc.", "The firm grew."}},
		{"initials and e.g.",
			"J. K. Rowling wrote seven books, e.g. the first one in 1997.",
			[]string{"J. K. Rowling wrote seven books, e.g. the first one in 1997."}},
		{"lists and a preface without content",
			"Sure! Here is a summary of the article in 89 words:\n\n- Lower costs for rail freight\n* Faster delivery by drone\n2) Better customer support",
			[]string{"Lower costs for rail freight", "Faster delivery by drone", "Better customer support"}},
		{"semicolons and clause joints split only long clauses",
			"Prices rose across the whole region; rents fell sharply in the city center, and wages stayed flat; so did rates.",
			[]string{"Prices rose across the whole region", "rents fell sharply in the city center", "and wages stayed flat; so did rates."}},
		{"questions and exclamations",
			"Is the museum open today? Yes! It opens at 9 am.",
			[]string{"Is the museum open today?", "It opens at 9 am."}},
		{"a preface with content words ends in a colon",
			"Here is a summary of the news in 63 words or less:\nThe bridge opened. Note: it is closed.",
			[]string{"The bridge opened.", "Note: it is closed."}},
		{"nothing to verify", "Sure! Here it is.", nil},
		{"a bare number is a claim", "Yes. 2009.", []string{"2009."}},
		{"opinion is a claim", "I think so.", []string{"I think so."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SplitClaims(tt.text)
			if !slices.Equal(got, tt.want) {
				t.Errorf("SplitClaims(%q)\n got %q\nwant %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestEachTokenMatchesTokenize(t *testing.T) {
	for _, text := range []string{
		"",
		"Dr. Smith didn't pay 1,600 dollars for five U.S. contaminated cups",
		"NASA won’t say. The company's Café Ünïcode rose 3.5% in the 1990s; it can't, won't.",
		"'s ’ NATO-led — e.g. twenty-one Über résumé",
	} {
		var got []token
		for tk := range eachToken(text) {
			got = append(got, tk)
		}
		if want := tokenize(text); !slices.Equal(got, want) {
			t.Errorf("eachToken(%q):\n %+v\nwant %+v", text, got, want)
		}
		var some []token // stopping early
		for tk := range eachToken(text) {
			if len(some) == 2 {
				break
			}
			some = append(some, tk)
		}
		if want := tokenize(text); !slices.Equal(some, want[:min(2, len(want))]) {
			t.Errorf("eachToken(%q), first two: %+v", text, some)
		}
	}
}

func TestTokenize(t *testing.T) {
	got := tokenize("Dr. Smith didn't pay 1,600 dollars for five U.S. contaminated cups")
	var norms, stems []string
	var flags []string
	for _, tk := range got {
		norms = append(norms, tk.norm)
		stems = append(stems, tk.stem)
		f := ""
		if tk.num {
			f += "n"
		}
		if tk.cap {
			f += "c"
		}
		if tk.stop {
			f += "s"
		}
		if tk.neg {
			f += "!"
		}
		flags = append(flags, f)
	}
	wantNorms := []string{"dr", "smith", "did", "not", "pay", "1600", "dollars", "for", "5", "u.s", "contaminated", "cups"}
	wantStems := []string{"dr", "smith", "did", "not", "pay", "1600", "dollar", "for", "5", "u.s", "contaminat", "cup"}
	wantFlags := []string{"", "c", "s", "s!", "", "n", "", "s", "n", "c", "", ""}
	if !slices.Equal(norms, wantNorms) || !slices.Equal(stems, wantStems) || !slices.Equal(flags, wantFlags) {
		t.Errorf("tokenize:\n norms %q\n  want %q\n stems %q\n  want %q\n flags %q\n  want %q", norms, wantNorms, stems, wantStems, flags, wantFlags)
	}
	for _, pair := range [][2]string{{"contamination", "contaminated"}, {"investigations", "investigation"}, {"stopped", "stop"}, {"studies", "study"}} {
		if stem(pair[0]) != stem(pair[1]) {
			t.Errorf("stem(%q) = %q, stem(%q) = %q: want equal", pair[0], stem(pair[0]), pair[1], stem(pair[1]))
		}
	}
}

// One context sentence: every context term has idf log(1+1/1) = ln 2 and weighs its square
// root; a term absent from the context has idf log(1+1/0.5) = ln 3.
var w2, w3 = math.Sqrt(math.Log(2)), math.Sqrt(math.Log(3))

func TestSupport(t *testing.T) {
	ctx := docs("The bridge opened in 1937 after the city approved the toll.")
	tests := []struct {
		name  string
		claim string
		want  float64
		why   string
	}{
		// bridge, open, 1937: all in the one window.
		{"paraphrase with a stemmed verb", "The bridge was opened in 1937.", 1, ""},
		// bridge, open, 1932: 1932 is novel (weight √ln 3) and a missing number (×0.35).
		{"number must match", "The bridge opened in 1932.", 2 * w2 / (2*w2 + w3) * missingNumber, "number not in context"},
		// negation the passage lacks, on a claim it otherwise covers fully.
		{"negation lowers support", "The bridge did not open in 1937.", negationFactor, "negation differs from passage"},
		// Oakland is a capitalised name absent from the context: coverage 3 of 4 terms, ×0.6.
		{"names must match", "The Oakland bridge opened in 1937.", 3 * w2 / (3*w2 + w3) * missingEntity, "name not in context"},
		// "rejected" where the passage says "approved": antonym hint, and "rejected" is novel.
		{"contradicting word", "The city rejected the toll.", 2 * w2 / (2*w2 + w3) * antonymFactor, "contradicting word in passage"},
		{"unrelated claim", "Whales migrate south.", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJudge(ctx, DefaultThreshold)
			got, why := j.support(tt.claim, nil)
			near(t, "support", got, tt.want)
			if why != tt.why {
				t.Errorf("why = %q, want %q", why, tt.why)
			}
		})
	}
}

func TestSupportBestWindow(t *testing.T) {
	// Two sentences: terms of the claim spread over both. idf: bridge (in both) ln(1+2/2) = ln 2,
	// open and 1937 (one each) ln(1+2/1) = ln 3; weights are their square roots. Best window (sentence 1) covers bridge and
	// open; the whole context covers all three. 1937 is in the context but not in the best
	// window: ×0.8.
	ctx := docs("The bridge opened to traffic. The bridge was painted in 1937.")
	j := newJudge(ctx, DefaultThreshold)
	got, why := j.support("The bridge opened in 1937.", nil)
	total := w2 + 2*w3
	window := w2 + w3
	want := (windowWeight*window + (1-windowWeight)*total) / total * strayNumber
	near(t, "support", got, want)
	if why != "number not in best passage" {
		t.Errorf("why = %q", why)
	}
}

func TestFaithfulness(t *testing.T) {
	ctx := docs("The bridge opened in 1937. It carries six lanes of traffic.")
	v, why, ok := Faithfulness("The bridge opened in 1937 [1]. Whales migrate south every winter.", ctx)
	if !ok {
		t.Fatal("not judged")
	}
	// Supports 1 (every term in the first sentence) and 0 (no term in the context): the weakest
	// quarter of two claims is the weaker one.
	near(t, "faithfulness", v, 0)
	if why != "1/2 claims supported" {
		t.Errorf("explanation = %q", why)
	}
	// Five claims, supports 1, 1, 0, 1, 1: the weakest ⌈5/4⌉ = 2 are 0 and 1.
	v, why, _ = Faithfulness("The bridge opened in 1937. It carries six lanes of traffic. "+
		"Whales migrate south every winter. The bridge opened in 1937. It carries six lanes of traffic.", ctx)
	near(t, "faithfulness", v, 0.5)
	if why != "4/5 claims supported" {
		t.Errorf("explanation = %q", why)
	}
	if _, _, ok := Faithfulness("The bridge opened.", nil); ok {
		t.Error("judged without documents")
	}
	if _, _, ok := Faithfulness("Sure!", ctx); ok {
		t.Error("judged an answer without claims")
	}
}

func TestWeakestQuarter(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{0.7}, 0.7},
		{[]float64{0.9, 0.3, 0.6, 1}, 0.3},                  // ⌈4/4⌉ = 1: the minimum
		{[]float64{0.2, 0.9, 0.4, 1, 0.6, 0.8}, 0.3},        // ⌈6/4⌉ = 2: (0.2 + 0.4) / 2
		{[]float64{1, 1, 0.5, 1, 1, 1, 1, 1, 0.1}, 1.6 / 3}, // ⌈9/4⌉ = 3: (0.1 + 0.5 + 1) / 3
	} {
		near(t, "weakestQuarter", weakestQuarter(slices.Clone(tt.in)), tt.want)
	}
}

func TestAnswerRelevancy(t *testing.T) {
	capital := docs("Paris is the capital of France.", "Lyon is a city in France.")
	tests := []struct {
		name, query, answer string
		docs                []record.Document
		want                float64
		why                 string
		ok                  bool
	}{
		{"covers the question and gives a date", "When did the bridge open?", "The bridge opened in 1937.", nil, 1, "answer covers 2/2 question terms", true},
		// No documents: every question term weighs ln 3; half covered, and no date: ×0.5.
		{"half the terms and no date", "When did the bridge open?", "The bridge is red.", nil, 0.25, "answer covers 1/2 question terms; no number or date for a how-many/when question", true},
		{"who question without a name", "Who designed the bridge?", "An engineer designed the bridge.", nil, 0.5, "answer covers 2/2 question terms; no name for a who question", true},
		// A refusal is right when nothing supports an answer, and wrong when a passage does.
		{"correct refusal", "When did the bridge open?", "I don't know.", nil, 1, "correct refusal: nothing retrieved", true},
		{"unwarranted refusal", "What is the capital of France?", "The documents do not say.", capital, 0, "refusal although the context covers the question at 1.00 (threshold 0.50)", true},
		{"not a refusal", "When did the bridge open?", "I don't know why you'd wait: the bridge opened in 1937.", nil, 1, "answer covers 2/2 question terms", true},
		{"no question", "", "The bridge opened in 1937.", nil, 0, "", false},
		// "Paris." is supported by the first passage, which holds capital and France.
		{"terse answer grounded in a passage", "What is the capital of France?", "Paris.", capital, 1, "answer covers 2/2 question terms (2 through its supporting passages)", true},
		// "Berlin." is supported by no passage: nothing is brought along. idf: capital ln 3
		// (one of two sentences), France ln 2 (both).
		{"terse unsupported answer", "What is the capital of France?", "Berlin.", capital, 0, "answer covers 0/2 question terms", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, why, ok := AnswerRelevancy(tt.query, tt.answer, tt.docs)
			if ok != tt.ok {
				t.Fatalf("ok = %v", ok)
			}
			near(t, "answer_relevancy", v, tt.want)
			if why != tt.why {
				t.Errorf("why = %q, want %q", why, tt.why)
			}
		})
	}
}

func TestContextPrecision(t *testing.T) {
	d := docs("Whales migrate south every winter.", "The bridge opened in 1937.", "The bridge carries six lanes.")
	// Labels: ranks 2 and 3 relevant → (1/2 + 2/3) / 2.
	v, why, ok := ContextPrecision(d, map[string]int{"d1": 0, "d2": 2, "d3": 1}, "", "")
	if !ok {
		t.Fatal("not judged")
	}
	near(t, "labelled", v, (1.0/2+2.0/3)/2)
	if why != "relevant at ranks 2,3 of 3 (by labels)" {
		t.Errorf("why = %q", why)
	}
	// Without labels, by the reference: only d2 supports "The bridge opened in 1937" → 1/2.
	v, why, _ = ContextPrecision(d, nil, "ignored when a reference exists", "The bridge opened in 1937.")
	near(t, "by reference", v, 0.5)
	if why != "relevant at ranks 2 of 3 (by reference)" {
		t.Errorf("why = %q", why)
	}
	// By the answer, nothing relevant.
	v, why, _ = ContextPrecision(d, nil, "Penguins cannot fly.", "")
	near(t, "none relevant", v, 0)
	if why != "no relevant document among 3 (by answer)" {
		t.Errorf("why = %q", why)
	}
	if _, _, ok := ContextPrecision(nil, nil, "a", "b"); ok {
		t.Error("judged without documents")
	}
	if _, _, ok := ContextPrecision(d, nil, "", ""); ok {
		t.Error("judged without labels, answer or reference")
	}
}

func TestContextRecall(t *testing.T) {
	d := docs("The bridge opened in 1937.", "The bridge carries six lanes.")
	v, why, ok := ContextRecall("The bridge opened in 1937. It was designed by Joseph Strauss.", d)
	if !ok {
		t.Fatal("not judged")
	}
	near(t, "context_recall", v, 0.5)
	if why != "1/2 reference claims found in context" {
		t.Errorf("why = %q", why)
	}
	if _, _, ok := ContextRecall("", d); ok {
		t.Error("judged without a reference")
	}
}

func TestCitations(t *testing.T) {
	d := docs("The bridge opened in 1937.", "The river floods every spring.")
	r := &record.Record{
		TraceID:   "t",
		Documents: d,
		Answer:    "The bridge opened in 1937 [1]. The river floods every spring [1][2]. The mayor resigned last week [2]. Tolls rose.",
	}
	r.Normalize(time.Unix(0, 0))
	if len(r.Citations) != 3 {
		t.Fatalf("citations: %+v", r.Citations)
	}
	// Pairs: (bridge, d1) supports; (river, d1) does not, and is not needed since d2 alone
	// supports; (river, d2) supports; (mayor, d2) does not. 2 of 4.
	v, why, ok := CitationPrecision(r.Citations, d)
	if !ok {
		t.Fatal("precision not judged")
	}
	near(t, "citation_precision", v, 0.5)
	if why != "2/4 citations support their claim" {
		t.Errorf("precision why = %q", why)
	}
	// Claims: bridge (supported by its citation), river (supported), mayor (cited but
	// unsupported), tolls (no citation). 2 of 4.
	v, why, ok = CitationRecall(r.Answer, r.Citations, d)
	if !ok {
		t.Fatal("recall not judged")
	}
	near(t, "citation_recall", v, 0.5)
	if why != "2/4 claims supported by their citations; 1 without citation" {
		t.Errorf("recall why = %q", why)
	}

	// A citation needed only together with another one is precise (ALCE).
	d2 := docs("The bridge opened in 1937.", "The bridge carries six lanes.")
	cits := []record.Citation{{Text: "The bridge opened in 1937 and carries six lanes.", DocumentIDs: []string{"d1", "d2", "nope"}}}
	v, why, _ = CitationPrecision(cits, d2)
	near(t, "joint citation precision", v, 2.0/3)
	if why != "2/3 citations support their claim; 1 cites [nope], which names no retrieved document" {
		t.Errorf("joint why = %q", why)
	}
	if _, _, ok := CitationPrecision(nil, d); ok {
		t.Error("precision judged without citations")
	}
	// An answer that cites nothing has no claim supported by a citation: 0, as the definition
	// (docs/metrics.md) says, not left out — unless it makes no claim at all.
	v, why, ok = CitationRecall(r.Answer, nil, d)
	if !ok || v != 0 || !strings.HasPrefix(why, "0/") || !strings.HasSuffix(why, "claims supported by their citations; the answer cites nothing") {
		t.Errorf("uncited answer: recall %v %q ok=%v, want 0", v, why, ok)
	}
	if _, _, ok := CitationRecall("", nil, d); ok {
		t.Error("recall judged for an answer without claims")
	}
}

// TestCitationsNamingNoDocument: an answer whose markers name no retrieved document cites
// something, and its explanations say what it cites (issue 52: "the answer cites nothing"
// for an answer citing [1] was not true).
func TestCitationsNamingNoDocument(t *testing.T) {
	d := docs("Refunds are issued within 14 days of purchase.", "Shipping takes 3 to 5 business days.")
	answer := "Refunds are issued within 14 days of purchase [3]. Shipping takes 3 to 5 business days [7, 3]. See the FAQ [sic]."
	r := record.Record{TraceID: "t", Answer: answer, Documents: d}
	r.Normalize(time.Now())
	if len(r.Citations) != 0 {
		t.Fatalf("citations %+v: [3] and [7] name no document of two", r.Citations)
	}
	v, why, ok := CitationRecall(r.Answer, r.Citations, d)
	if !ok || v != 0 || !strings.HasSuffix(why, "; the answer cites [3], [7], which name no retrieved document") {
		t.Errorf("recall %v %q ok=%v", v, why, ok)
	}
	// Some markers resolve, one does not: the explanation names the one.
	answer = "Refunds are issued within 14 days of purchase [1]. Shipping takes 3 to 5 business days [5]."
	r = record.Record{TraceID: "t", Answer: answer, Documents: d}
	r.Normalize(time.Now())
	v, why, ok = CitationRecall(r.Answer, r.Citations, d)
	if !ok || !strings.HasSuffix(why, "1 without citation; the answer cites [5], which names no retrieved document") {
		t.Errorf("partial recall %v %q ok=%v", v, why, ok)
	}
	// An answer that cites nothing still says so.
	_, why, _ = CitationRecall("Refunds are issued within 14 days of purchase.", nil, d)
	if !strings.HasSuffix(why, "the answer cites nothing") {
		t.Errorf("uncited: %q", why)
	}
}

func TestAnswerSimilarity(t *testing.T) {
	v, why, ok := AnswerSimilarity("The cat sat on the mat.", "A cat sat on a red mat!")
	if !ok {
		t.Fatal("not judged")
	}
	// answer: cat sat on mat (4); reference: cat sat on red mat (5); common 4.
	near(t, "answer_similarity", v, 2*1*0.8/1.8)
	if why != "token F1: precision 1.00, recall 0.80" {
		t.Errorf("why = %q", why)
	}
	v, why, _ = AnswerSimilarity("", "A cat.")
	near(t, "empty answer", v, 0)
	if why != "empty answer" {
		t.Errorf("why = %q", why)
	}
	if _, _, ok := AnswerSimilarity("A cat.", ""); ok {
		t.Error("judged without a reference")
	}
}

func TestWordOverlap(t *testing.T) {
	// answer words: the, bridge, opened, late (4 distinct); context has 3 of them.
	near(t, "overlap", WordOverlap("The bridge opened late, the bridge.", docs("The bridge opened in 1937.")), 0.75)
}

func TestScorer(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := New(Options{Now: func() time.Time { return now }})
	if s.Name() != "builtin" {
		t.Fatalf("Name = %q", s.Name())
	}
	r := &record.Record{
		TraceID: "trace-1", SpanID: "span-1", Service: "search",
		Query:     "When did the bridge open?",
		Documents: docs("The bridge opened in 1937.", "Whales migrate south every winter."),
		Answer:    "The bridge opened in 1937 [1].",
		Sampling:  &record.Sampling{Probability: 0.25, Reason: "ratio"},
	}
	r.Normalize(now)
	got, err := s.Score(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	// No reference: context_recall and answer_similarity are omitted. Context precision is
	// judged against the answer: d1 relevant at rank 1. Faithfulness is calibrated: raw 1 is
	// 1/(1+exp(-slope·(1-center))).
	want := []score.Result{
		{Metric: "faithfulness", Value: 1 / (1 + math.Exp(-FaithfulnessCalibration.Slope*(1-FaithfulnessCalibration.Center))),
			Explanation: "1/1 claims supported; raw support 1.00"},
		{Metric: "answer_relevancy", Value: 1, Explanation: "answer covers 2/2 question terms"},
		{Metric: "context_precision", Value: 1, Explanation: "relevant at ranks 1 of 2 (by answer)"},
		{Metric: "citation_precision", Value: 1, Explanation: "1/1 citations support their claim"},
		{Metric: "citation_recall", Value: 1, Explanation: "1/1 claims supported by their citations; 0 without citation"},
	}
	for i := range want {
		want[i].TraceID, want[i].SpanID, want[i].Service = "trace-1", "span-1", "search"
		want[i].Weight, want[i].Scorer, want[i].Time = 4, "builtin", now
	}
	if !slices.Equal(got, want) {
		t.Errorf("Score:\n got %+v\nwant %+v", got, want)
	}

	// With a reference and a subset of metrics.
	r.Reference = "It opened in 1937."
	r.Sampling = nil
	got, _ = New(Options{Metrics: []string{"answer_similarity", "context_recall"}, Now: func() time.Time { return now }}).Score(context.Background(), r)
	var names []string
	for _, res := range got {
		names = append(names, res.Metric)
		if res.Weight != 1 {
			t.Errorf("%s weight = %v, want 1 without sampling", res.Metric, res.Weight)
		}
	}
	if !slices.Equal(names, []string{"context_recall", "answer_similarity"}) {
		t.Errorf("metrics = %q", names)
	}

	// Nothing to judge: no results, no error.
	got, err = s.Score(context.Background(), &record.Record{TraceID: "x", Query: "hello"})
	if err != nil || len(got) != 0 {
		t.Errorf("empty record: %+v, %v", got, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Score(ctx, r); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err = %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
	err := Options{Threshold: 1.5, Metrics: []string{"faithfulness", "rubric_accuracy"}}.Validate()
	want := "builtin scorer: threshold must be between 0 and 1, got 1.5"
	if err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %q", err, want)
	}
	err = Options{Metrics: []string{"faithfulness", "rubric_accuracy"}}.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "builtin scorer: unknown metric(s) rubric_accuracy; it scores faithfulness, ") {
		t.Errorf("Validate = %v", err)
	}
}

func TestStripMarkers(t *testing.T) {
	isID := func(s string) bool { return s == "doc-a" }
	got := stripMarkers("Rates rose [1][2, 3]. See [doc-a] and [sic] [].", isID)
	want := "Rates rose. See and [sic] []."
	if got != want {
		t.Errorf("stripMarkers = %q, want %q", got, want)
	}
}

// A record beyond the limits is scored with bounded work: at most maxClaims claims are judged,
// and only the first maxContextBytes of context are indexed.
func TestLargeRecordIsBounded(t *testing.T) {
	sentence := "The bridge opened in 1937 after a vote. "
	answer := strings.Repeat(sentence, 2*maxClaims)
	v, why, ok := Faithfulness(answer, docs("Whales migrate south every winter, and the bridge opened in 1937."))
	if !ok {
		t.Fatal("not judged")
	}
	// Every claim: bridge, open, 1937 in the one-sentence context, "vote" not.
	if want := fmt.Sprintf("%d/%d claims supported; judged the first %d of %d claims", maxClaims, maxClaims, maxClaims, 2*maxClaims); why != want {
		t.Errorf("why = %q, want %q", why, want)
	}
	near(t, "faithfulness", v, 3*w2/(3*w2+w3))

	// Each document holds 264 000 bytes: the 1 MiB budget ends inside the fourth, after 3887
	// sentences and a cut one.
	var d []record.Document
	for i := 0; i < 6; i++ {
		d = append(d, record.Document{ID: string(rune('a' + i)), Content: strings.Repeat("Whales migrate south every winter, and the bridge opened in 1937. ", 4000)})
	}
	ix := newIndex(d)
	for k := 4; k < 6; k++ {
		if w := ix.docWin[k]; w[0] != w[1] {
			t.Errorf("document %d indexed beyond the context limit: windows %v", k, w)
		}
	}
	if w := ix.docWin[3]; w[1]-w[0] != 3888 {
		t.Errorf("document 3: %d windows, want 3888", w[1]-w[0])
	}
}

// The scorer keeps no per-record state: concurrent calls give the same results (run with -race).
func TestScorerConcurrent(t *testing.T) {
	s := New(Options{Now: func() time.Time { return time.Unix(0, 0) }})
	r := benchRecord()
	want, err := s.Score(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			got, err := s.Score(context.Background(), r)
			if err == nil && !slices.Equal(got, want) {
				err = fmt.Errorf("concurrent result differs: %+v", got)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// The calibration is strictly increasing (so it keeps ROC AUC), maps its center to 0.5, stays
// in (0, 1) and inverts; the fitted map puts the decision below raw 0.5.
func TestCalibrationMonotone(t *testing.T) {
	c := FaithfulnessCalibration
	if !(c.Slope > 0 && c.Center > 0 && c.Center < 1) {
		t.Fatalf("fitted calibration %+v", c)
	}
	prev := -1.0
	for i := 0; i <= 1000; i++ {
		x := float64(i) / 1000
		y := c.Apply(x)
		if !(y > prev) || y <= 0 || y >= 1 {
			t.Fatalf("Apply(%v) = %v after %v: not strictly increasing in (0, 1)", x, y, prev)
		}
		prev = y
	}
	if y := c.Apply(c.Center); y != 0.5 {
		t.Fatalf("Apply(center) = %v", y)
	}
	if CalibrateFaithfulness(c.Center-0.01) >= 0.5 || CalibrateFaithfulness(c.Center+0.01) <= 0.5 {
		t.Fatal("the decision is not at the center")
	}
}
