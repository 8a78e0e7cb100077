package bertscore

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm/openai"
)

// paperVectors builds the example of the BERTScore paper (Zhang et al. 2019, Figure 1):
// reference "the weather is cold today", candidate "it is freezing today". Each reference
// token is a basis vector; each candidate token has, along the reference tokens it matches
// best, the cosine the figure shows (the 0.713, weather 0.515 and cold 0.796 via
// freezing, is 0.858, today 0.913), and the rest of its length in a dimension of its own.
func paperVectors() (cand, ref [][]float64) {
	const dim = 9
	unit := func(i int) []float64 { v := make([]float64, dim); v[i] = 1; return v }
	ref = [][]float64{unit(0), unit(1), unit(2), unit(3), unit(4)} // the weather is cold today
	mk := func(own int, along map[int]float64) []float64 {
		v := make([]float64, dim)
		rest := 1.0
		for i, s := range along {
			v[i] = s
			rest -= s * s
		}
		v[own] = math.Sqrt(rest)
		return v
	}
	cand = [][]float64{
		mk(5, map[int]float64{0: 0.713}),           // it ~ the
		mk(6, map[int]float64{2: 0.858}),           // is ~ is
		mk(7, map[int]float64{1: 0.515, 3: 0.796}), // freezing ~ weather, cold
		mk(8, map[int]float64{4: 0.913}),           // today ~ today
	}
	return cand, ref
}

func TestGreedyPaperExample(t *testing.T) {
	cand, ref := paperVectors()
	// The figure's idf weights of the reference tokens.
	idf := []float64{1.27, 7.94, 1.82, 7.90, 8.88}
	p, r, f, err := Greedy(cand, ref, nil, idf)
	if err != nil {
		t.Fatal(err)
	}
	wantR := (0.713*1.27 + 0.515*7.94 + 0.858*1.82 + 0.796*7.90 + 0.913*8.88) / (1.27 + 7.94 + 1.82 + 7.90 + 8.88)
	wantP := (0.713 + 0.858 + 0.796 + 0.913) / 4 // each candidate token's best match, unweighted
	if math.Abs(r-wantR) > 1e-12 || math.Abs(p-wantP) > 1e-12 || math.Abs(f-2*wantP*wantR/(wantP+wantR)) > 1e-12 {
		t.Fatalf("P %v R %v F %v, want %v %v", p, r, f, wantP, wantR)
	}
	if math.Abs(r-0.7534) > 5e-5 {
		t.Fatalf("R_BERT = %.5f, want 0.7534 (the figure's weighted recall)", r)
	}
	// Without weights the recall is the plain mean of the best matches.
	if _, r, _, _ := Greedy(cand, ref, nil, nil); math.Abs(r-(0.713+0.515+0.858+0.796+0.913)/5) > 1e-12 {
		t.Fatalf("unweighted R %v", r)
	}
	if got := Rescale(0.9, 0.8); math.Abs(got-0.5) > 1e-12 {
		t.Fatalf("Rescale(0.9, 0.8) = %v, want 0.5", got)
	}
	for _, c := range []struct {
		cand, ref [][]float64
		wc        []float64
	}{{nil, ref, nil}, {cand, [][]float64{{0, 0, 0, 0, 0, 0, 0, 0, 0}}, nil}, {cand, [][]float64{{1, 0}}, nil}, {cand, ref, []float64{1}}} {
		if _, _, _, err := Greedy(c.cand, c.ref, c.wc, nil); err == nil {
			t.Errorf("Greedy(%v, %v): want an error", c.cand, c.ref)
		}
	}
}

// fakeTEI speaks text-embeddings-inference's /tokenize and /embed_all: a text is split on
// spaces into the words of vocab, between [CLS] (101) and [SEP] (102), special tokens.
type fakeTEI struct {
	*httptest.Server
	vocab map[string]uint32
	vecs  map[uint32][]float64
	texts []string // every text received
}

func newFakeTEI(t *testing.T, vocab map[string]uint32, vecs map[uint32][]float64) *fakeTEI {
	f := &fakeTEI{vocab: vocab, vecs: vecs}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Inputs []string `json:"inputs"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		f.texts = append(f.texts, in.Inputs...)
		type tok struct {
			ID      uint32 `json:"id"`
			Text    string `json:"text"`
			Special bool   `json:"special"`
			Start   *int   `json:"start"`
			Stop    *int   `json:"stop"`
		}
		var toks [][]tok
		var embs [][][]float64
		for _, text := range in.Inputs {
			ts := []tok{{ID: 101, Text: "[CLS]", Special: true}}
			for _, word := range strings.Fields(text) {
				ts = append(ts, tok{ID: vocab[word], Text: word})
			}
			ts = append(ts, tok{ID: 102, Text: "[SEP]", Special: true})
			toks = append(toks, ts)
			var e [][]float64
			for _, x := range ts {
				e = append(e, vecs[x.ID])
			}
			embs = append(embs, e)
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/tokenize":
			json.NewEncoder(w).Encode(toks)
		case "/embed_all":
			json.NewEncoder(w).Encode(embs)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func TestScorerTokenEmbeddings(t *testing.T) {
	cand, ref := paperVectors()
	vocab := map[string]uint32{"the": 1, "weather": 2, "is": 3, "cold": 4, "today": 5, "it": 6, "freezing": 7}
	cls := []float64{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.9}
	sep := []float64{0.3, 0, 0, 0, 0, 0, 0.2, 0, 0.1}
	vecs := map[uint32][]float64{1: ref[0], 2: ref[1], 3: ref[2], 4: ref[3], 5: ref[4], 101: cls, 102: sep}
	// "is" has one token id, so one vector: the candidate's "is" is the reference's (cosine 1).
	vecs[6], vecs[7] = cand[0], cand[2]
	tei := newFakeTEI(t, vocab, vecs)

	idf := NewIDF(100)
	idf.Add([]uint32{1, 3, 5}) // earlier references: "the is today" twice, "weather" once
	idf.Add([]uint32{1, 3, 5, 2})
	s, err := New(Options{Tokens: TEI{URL: tei.URL + "/"}, IDF: idf, Redact: func(s string) string { return strings.ReplaceAll(s, "secret", "") }})
	if err != nil {
		t.Fatal(err)
	}
	rec := &record.Record{TraceID: "t1", Service: "svc", Answer: "it is freezing today secret", Reference: "the weather is cold today"}
	res, err := s.Score(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	// By hand. M = 3 references (this one counted first): df the=3 weather=2 is=3 cold=1
	// today=3, it=0 freezing=0; idf = ln(4 / (df + 1)).
	ln := math.Log
	wRef := []float64{ln(4.0 / 4), ln(4.0 / 3), ln(4.0 / 4), ln(4.0 / 2), ln(4.0 / 4)} // the weather is cold today
	wCand := []float64{ln(4.0 / 1), ln(4.0 / 4), ln(4.0 / 1), ln(4.0 / 4)}             // it is freezing today
	cos := func(a, b []float64) float64 {
		var d, na, nb float64
		for i := range a {
			d, na, nb = d+a[i]*b[i], na+a[i]*a[i], nb+b[i]*b[i]
		}
		return d / math.Sqrt(na*nb)
	}
	refToks := [][]float64{cls, vecs[1], vecs[2], vecs[3], vecs[4], vecs[5], sep}
	candToks := [][]float64{cls, vecs[6], vecs[3], vecs[7], vecs[5], sep}
	best := func(v []float64, others [][]float64) float64 {
		m := -1.0
		for _, o := range others {
			m = math.Max(m, cos(v, o))
		}
		return m
	}
	var num, den float64
	for i, w := range wRef {
		num, den = num+w*best(refToks[i+1], candToks), den+w
	}
	wantR := num / den
	num, den = 0, 0
	for i, w := range wCand {
		num, den = num+w*best(candToks[i+1], refToks), den+w
	}
	wantP := num / den
	want := map[string]float64{score.BERTScorePrecision: wantP, score.BERTScoreRecall: wantR, score.BERTScoreF1: 2 * wantP * wantR / (wantP + wantR)}
	if len(res) != 3 {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if math.Abs(r.Value-want[r.Metric]) > 1e-9 || r.Scorer != "bertscore" || r.TraceID != "t1" || r.Weight != 1 {
			t.Errorf("%s = %+v, want %v", r.Metric, r, want[r.Metric])
		}
	}
	if strings.Contains(strings.Join(tei.texts, "|"), "secret") {
		t.Fatalf("the server received unredacted text: %q", tei.texts)
	}

	// The baseline rescales each score.
	s.o.Baseline = Baseline{Precision: 0.5, Recall: 0.4, F1: 0.45}
	s.o.IDF = nil
	rec.Answer = "it is freezing today"
	res, err = s.Score(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := New(Options{Tokens: TEI{URL: tei.URL}})
	rawRes, err := raw.Score(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range []float64{0.5, 0.4, 0.45} {
		if w := math.Max(0, (rawRes[i].Value-b)/(1-b)); math.Abs(res[i].Value-w) > 1e-12 {
			t.Errorf("%s rescaled %v, want %v", res[i].Metric, res[i].Value, w)
		}
	}

	// No reference: no results. A dead server: a failure per metric.
	if res, err := raw.Score(context.Background(), &record.Record{Answer: "x"}); res != nil || err != nil {
		t.Fatalf("no reference: %v %v", res, err)
	}
	tei.Close()
	_, err = raw.Score(context.Background(), rec)
	var f score.Failure
	if !errors.As(err, &f) || len(f) != 3 || f[0].Outcome != score.OutcomeError {
		t.Fatalf("dead server: %v", err)
	}
}

// Without a token-embeddings server, an OpenAI-compatible embeddings API gives one vector per
// sentence, matched the same way.
func TestScorerSentenceEmbeddings(t *testing.T) {
	vec := map[string][]float64{
		"Paris is the capital.":   {1, 0, 0},
		"It has the Louvre.":      {0, 1, 0},
		"The capital is Paris.":   {0.9, math.Sqrt(1 - 0.81), 0},
		"It is on the Seine.":     {0, 0.6, 0.8},
		"The Louvre is a museum.": {0.2, 0.9, math.Sqrt(1 - 0.04 - 0.81)},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&in)
		type d struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		}
		out := struct {
			Data  []d            `json:"data"`
			Usage map[string]int `json:"usage"`
		}{Usage: map[string]int{"prompt_tokens": 30, "total_tokens": 30}}
		for i, s := range in.Input {
			out.Data = append(out.Data, d{"embedding", i, vec[s]})
		}
		json.NewEncoder(w).Encode(out)
	}))
	defer srv.Close()
	be := openai.New(openai.Config{BaseURL: srv.URL + "/v1/", Model: "m", EmbeddingsModel: "emb-1"})
	s, err := New(Options{Sentences: be.Embedder(), Model: "emb-1"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Score(context.Background(), &record.Record{TraceID: "t", Answer: "Paris is the capital. It has the Louvre.",
		Reference: "The capital is Paris. It is on the Seine. The Louvre is a museum."})
	if err != nil {
		t.Fatal(err)
	}
	// P: answer sentences' best matches 0.9 (capital), 0.9 (Louvre); R: 0.9, 0.6, 0.9.
	wantP, wantR := 0.9, (0.9+0.6+0.9)/3
	if math.Abs(res[0].Value-wantP) > 1e-9 || math.Abs(res[1].Value-wantR) > 1e-9 || math.Abs(res[2].Value-2*wantP*wantR/(wantP+wantR)) > 1e-9 {
		t.Fatalf("results %+v", res)
	}
	if res[0].Model != "emb-1" || res[0].InputTokens != 30 || res[1].InputTokens != 0 {
		t.Fatalf("the embeddings call's tokens are reported once: %+v", res)
	}
}

func TestIDFBounded(t *testing.T) {
	idf := NewIDF(2)
	idf.Add([]uint32{1, 2, 3, 1})
	w := idf.Weights([]uint32{1, 2, 3})
	// M = 1; ids 1 and 2 kept (df 1: ln(2/2) = 0), id 3 beyond the bound counts as unseen.
	if w[0] != 0 || w[1] != 0 || math.Abs(w[2]-math.Log(2)) > 1e-12 {
		t.Fatalf("weights %v", w)
	}
}
