package trec

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func readQrelsFile(t *testing.T, path string) (Qrels, Format) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	q, format, err := ReadQrels(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return q, format
}

func readRunFile(t *testing.T, path string) (Run, Format) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, format, err := ReadRun(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return r, format
}

// handValues are testdata/hand.* worked by hand with trec_eval's rules (cut-offs 1, 3, 5).
//
// q1: judgements d1=2 d2=0 d3=1 d4=1 (3 relevant). Scores d2 .9, d1 .8, d9 .8, d3 .5, d8 .1:
// the tie at .8 goes to the larger document id, so the ranking is d2 d9 d1 d3 d8 (the file's
// rank column, which says d1 second, is ignored). Relevant at ranks 3 (grade 2) and 4.
// P: 0, 1/3, 2/5. recall: 0, 1/3, 2/3. success: 0, 1, 1. recip_rank 1/3.
// map = (1/3 + 2/4) / 3. ideal DCG = 2 + 1/log2(3) + 1/2 (cut at 3 and 5 alike);
// DCG@3 = 2/log2(4) = 1; DCG@5 = 1 + 1/log2(5).
//
// q2: d5=1 d6=0; both score .7, so d6 ranks first and d5 second.
// P: 0, 1/3, 1/5. recall: 0, 1, 1. success 0, 1, 1. recip_rank 1/2, map 1/2.
// ndcg_cut_3 = ndcg_cut_5 = (1/log2(3)) / 1.
//
// q3 is judged with no relevant document: 0 everywhere, and it counts in the means.
// q4 is judged but not in the run: left out (trec_eval without -c). q5 is unjudged: ignored.
func handValues() map[string]map[string]float64 {
	l2 := math.Log2
	ideal1 := 2 + 1/l2(3) + 0.5
	q1 := map[string]float64{
		"P_1": 0, "P_3": 1.0 / 3, "P_5": 2.0 / 5,
		"recall_1": 0, "recall_3": 1.0 / 3, "recall_5": 2.0 / 3,
		"ndcg_cut_1": 0, "ndcg_cut_3": 1 / ideal1, "ndcg_cut_5": (1 + 1/l2(5)) / ideal1,
		"success_1": 0, "success_3": 1, "success_5": 1,
		"recip_rank": 1.0 / 3, "map": (1.0/3 + 2.0/4) / 3,
	}
	q2 := map[string]float64{
		"P_1": 0, "P_3": 1.0 / 3, "P_5": 1.0 / 5,
		"recall_1": 0, "recall_3": 1, "recall_5": 1,
		"ndcg_cut_1": 0, "ndcg_cut_3": 1 / l2(3), "ndcg_cut_5": 1 / l2(3),
		"success_1": 0, "success_3": 1, "success_5": 1,
		"recip_rank": 0.5, "map": 0.5,
	}
	zero := map[string]float64{}
	for m := range q1 {
		zero[m] = 0
	}
	return map[string]map[string]float64{"q1": q1, "q2": q2, "q3": zero}
}

func TestHandCollection(t *testing.T) {
	for _, files := range [][2]string{{"hand.qrels", "hand.run"}, {"hand.beir.tsv", "hand.beir.json"}, {"hand.qrels", "hand.beir.json"}} {
		t.Run(files[0]+"+"+files[1], func(t *testing.T) {
			qrels, _ := readQrelsFile(t, filepath.Join("testdata", files[0]))
			run, _ := readRunFile(t, filepath.Join("testdata", files[1]))
			if got := strings.Join(run.Ranking("q1"), " "); got != "d2 d9 d1 d3 d8" {
				t.Fatalf("q1 ranking %q, want trec_eval's d2 d9 d1 d3 d8", got)
			}
			for _, complete := range []bool{false, true} {
				res, err := Evaluate(qrels, run, Options{K: []int{1, 3, 5}, Complete: complete})
				if err != nil {
					t.Fatal(err)
				}
				want := handValues()
				wantQueries := "q1 q2 q3"
				if complete {
					want["q4"] = want["q3"] // judged, not retrieved: 0 on every measure
					wantQueries = "q1 q2 q3 q4"
				}
				if got := strings.Join(res.Queries, " "); got != wantQueries {
					t.Fatalf("complete=%v: evaluated %q, want %q", complete, got, wantQueries)
				}
				if res.RunOnly != 1 || res.QrelsOnly != 1 || res.NoRelevant != 1 {
					t.Fatalf("RunOnly %d QrelsOnly %d NoRelevant %d, want 1 1 1", res.RunOnly, res.QrelsOnly, res.NoRelevant)
				}
				if len(res.Measures) != 14 {
					t.Fatalf("measures %v", res.Measures)
				}
				for _, q := range res.Queries {
					for _, m := range res.Measures {
						if got, w := res.PerQuery[q][m], want[q][m]; math.Abs(got-w) > 1e-12 {
							t.Errorf("complete=%v %s %s = %.6f, want %.6f", complete, q, m, got, w)
						}
					}
				}
				for _, s := range res.Means {
					var sum float64
					for q := range want {
						sum += want[q][s.Metric]
					}
					if w := sum / float64(len(want)); math.Abs(s.Mean-w) > 1e-12 || s.N != len(want) {
						t.Errorf("complete=%v mean %s = %.6f over %d, want %.6f over %d", complete, s.Metric, s.Mean, s.N, w, len(want))
					}
				}
			}
		})
	}
	// Two of the means as printed numbers, so the hand working above is pinned too.
	qrels, _ := readQrelsFile(t, "testdata/hand.qrels")
	run, _ := readRunFile(t, "testdata/hand.run")
	res, err := Evaluate(qrels, run, Options{K: []int{1, 3, 5}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range res.Lines() {
		if l.QueryID == "all" {
			got[l.Metric] = strconv.FormatFloat(l.Value, 'f', 4, 64)
		}
	}
	for m, w := range map[string]string{"map": "0.2593", "ndcg_cut_3": "0.3168", "ndcg_cut_5": "0.3626", "recall_5": "0.5556", "P_3": "0.2222"} {
		if got[m] != w {
			t.Errorf("all %s = %s, want %s (trec_eval prints 4 decimals)", m, got[m], w)
		}
	}
}

// TestIRMeasuresFixtures runs the trec_eval expectations that sampler/scorers/retrieval checks
// metric by metric (ir_measures' pytrec_eval tests) through the file readers and Evaluate.
func TestIRMeasuresFixtures(t *testing.T) {
	dir := filepath.Join("..", "..", "scorers", "retrieval", "testdata")
	cases := []struct {
		fixture, measure, qid string
		k                     int
		want                  float64
	}{
		{"P", "P_4", "0", 4, 0.5}, {"P", "P_4", "1", 4, 0.25},
		{"nDCG", "ndcg_cut_3", "0", 3, 0.76018}, {"nDCG", "ndcg_cut_3", "1", 3, 0},
		{"Success", "success_2", "0", 2, 1}, {"Success", "success_2", "1", 2, 0}, {"Success", "success_2", "all", 2, 0.5},
	}
	for _, c := range cases {
		qrels, format := readQrelsFile(t, filepath.Join(dir, c.fixture+".qrels"))
		if format != FormatTRECQrels {
			t.Fatalf("%s.qrels detected as %s", c.fixture, format)
		}
		run, _ := readRunFile(t, filepath.Join(dir, c.fixture+".run"))
		res, err := Evaluate(qrels, run, Options{K: []int{c.k}})
		if err != nil {
			t.Fatal(err)
		}
		var got float64
		for _, l := range res.Lines() {
			if l.QueryID == c.qid && l.Metric == c.measure {
				got = l.Value
			}
		}
		if math.Abs(got-c.want) > 1e-5 {
			t.Errorf("%s %s %s = %.5f, want %.5f", c.fixture, c.measure, c.qid, got, c.want)
		}
	}
}

func TestDetectAndErrors(t *testing.T) {
	qrelsCases := []struct{ name, in, want string }{
		{"beir header only", "query-id\tcorpus-id\tscore\n", "x: no judgements"},
		{"neither", "q1 d1\n", "x: line 1: neither BEIR qrels (header `query-id corpus-id score`) nor TREC qrels (`qid iter docid grade`): 2 fields"},
		{"trec short line", "# c\nq1 0 d1 1\n\nq1 0 d2\n", "x: line 4: TREC qrels line has 3 fields, want 4 (qid iter docid grade)"},
		{"beir bad grade", "query-id\tcorpus-id\tscore\nq1\td1\t0.5\n", "x: line 2: grade \"0.5\" is not an integer"},
		{"beir four fields", "query-id\tcorpus-id\tscore\nq1\td1\t1\t2\n", "x: line 2: BEIR qrels line has 4 fields, want 3 (query-id corpus-id score)"},
		{"duplicate", "q1 0 d1 1\nq1 0 d1 0\n", "x: line 2: document \"d1\" judged twice for query \"q1\""},
	}
	for _, c := range qrelsCases {
		_, _, err := ReadQrels(strings.NewReader(c.in), "x")
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
	runCases := []struct{ name, in, want string }{
		{"five fields", "q1 Q0 d1 1 0.5\n", "x: line 1: neither a TREC run line (`qid Q0 docid rank score tag`, got 5 fields) nor BEIR results JSON"},
		{"bad score", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 high t\n", "x: line 2: score \"high\" is not a number"},
		{"duplicate", "q1 Q0 d1 1 0.5 t\nq2 Q0 d1 1 0.5 t\nq1 Q0 d1 3 0.1 t\n", "x: line 3: document \"d1\" listed twice for query \"q1\""},
		{"empty", "\n# nothing\n", "x: no results"},
		{"json string score", "{\n \"q1\": {\"d1\": 1,\n  \"d2\": \"high\"}}", "x: line 3: score of \"d2\" for query \"q1\" is a string, want a number"},
		{"json duplicate", "{\"q1\": {\"d1\": 1},\n\"q1\": {\"d1\": 2}}", "x: line 2: document \"d1\" listed twice for query \"q1\""},
		{"json truncated", "{\"q1\": {\"d1\": 1,\n", "x: line 1: unexpected end of JSON"},
		{"json list", "{\"q1\": [\"d1\"]}", "x: line 1: want an object of document scores for query \"q1\", got \"[\""},
		{"json trailing", "{\"q1\": {\"d1\": 1}}\n{}", "x: line 2: data after the results object"},
	}
	for _, c := range runCases {
		_, _, err := ReadRun(strings.NewReader(c.in), "x")
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
		var le *LineError
		if strings.Contains(c.want, "line ") && !errors.As(err, &le) {
			t.Errorf("%s: %T is not a *LineError", c.name, err)
		}
	}
	if _, err := Evaluate(Qrels{"a": {"d": 1}}, Run{"b": {"d": 1}}, Options{}); err == nil || err.Error() != "no query has both results and judgements (1 run queries, 1 judged queries)" {
		t.Errorf("disjoint: %v", err)
	}
}

func TestParseK(t *testing.T) {
	ks, err := ParseK("10,1,5")
	if err != nil || len(ks) != 3 || ks[0] != 1 || ks[2] != 10 {
		t.Fatalf("ParseK = %v, %v", ks, err)
	}
	for in, want := range map[string]string{"1,0": `--k: "0" is not a positive integer`, "5,5": "--k: 5 given twice", ",": "--k: no cut-offs", "a": `--k: "a" is not a positive integer`} {
		if _, err := ParseK(in); err == nil || err.Error() != want {
			t.Errorf("ParseK(%q) err %v, want %q", in, err, want)
		}
	}
}

func TestStudentT(t *testing.T) {
	// Closed forms: df=1 (Cauchy) P(|T|≥t) = 1 − 2·atan(t)/π; df=2: 1 − t/√(2+t²).
	for _, x := range []float64{0.3, 1, 2.5, 7} {
		if got, w := StudentTTwoSided(x, 1), 1-2*math.Atan(x)/math.Pi; math.Abs(got-w) > 1e-10 {
			t.Errorf("df=1 t=%v: %v, want %v", x, got, w)
		}
		if got, w := StudentTTwoSided(x, 2), 1-x/math.Sqrt(2+x*x); math.Abs(got-w) > 1e-10 {
			t.Errorf("df=2 t=%v: %v, want %v", x, got, w)
		}
	}
	// Quantiles against the printed table (3 decimals) and the normal limit.
	for df, w := range map[float64]float64{1: 12.706, 4: 2.776, 10: 2.228, 30: 2.042, 1e6: 1.960} {
		if got := StudentTQuantile(0.975, df); math.Abs(got-w) > 5e-4 {
			t.Errorf("t_.975(%v) = %.4f, want %.3f", df, got, w)
		}
	}
}

func TestSignTest(t *testing.T) {
	for _, c := range []struct {
		w, l int
		want float64
	}{{8, 2, 2 * (1 + 10 + 45) / 1024.0}, {2, 8, 2 * (1 + 10 + 45) / 1024.0}, {5, 5, 1}, {0, 0, 1}, {6, 0, 2 / 64.0}} {
		if got := signTest(c.w, c.l); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("signTest(%d, %d) = %v, want %v", c.w, c.l, got, c.want)
		}
	}
}

func TestCompare(t *testing.T) {
	base := &Result{Measures: []string{"map"}, Queries: []string{"a", "b", "c", "d", "e", "f"}, PerQuery: map[string]map[string]float64{
		"a": {"map": 0.5}, "b": {"map": 0.4}, "c": {"map": 0.3}, "d": {"map": 0.6}, "e": {"map": 0.2}, "f": {"map": 0.9},
	}}
	// f is missing from the candidate: only the five shared queries are paired.
	cand := &Result{Measures: []string{"map"}, Queries: []string{"a", "b", "c", "d", "e", "z"}, PerQuery: map[string]map[string]float64{
		"a": {"map": 0.6}, "b": {"map": 0.6}, "c": {"map": 0.6}, "d": {"map": 0.5}, "e": {"map": 0.6}, "z": {"map": 0},
	}}
	cs, err := Compare(base, cand)
	if err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	// d = .1 .2 .3 -.1 .4: mean .18, s² = (.0064+.0004+.0144+.0784+.0484)/4 = .037, se = √(.037/5).
	se := math.Sqrt(0.037 / 5)
	tt := 0.18 / se
	if c.N != 5 || c.Wins != 4 || c.Losses != 1 || c.Ties != 0 {
		t.Fatalf("%+v", c)
	}
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %.10f, want %.10f", name, got, want)
		}
	}
	check("diff", c.Diff, 0.18)
	check("baseline", c.Baseline, 0.4)
	check("candidate", c.Mean, 0.58)
	q := StudentTQuantile(0.975, 4)
	check("lo", c.Lo, 0.18-q*se)
	check("hi", c.Hi, 0.18+q*se)
	check("t p", c.TP, StudentTTwoSided(tt, 4))
	check("sign p", c.SignP, 2*(1+5)/32.0)
	if c.TP < 0.10 || c.TP > 0.11 { // t = 2.0925 on 4 df: p ≈ 0.1045
		t.Errorf("t p = %v, want ≈ 0.1045", c.TP)
	}
	if _, err := Compare(base, &Result{Measures: []string{"map"}, Queries: []string{"z"}, PerQuery: map[string]map[string]float64{"z": {"map": 1}}}); err == nil {
		t.Error("no shared query: want an error")
	}
}

func FuzzReadRun(f *testing.F) {
	f.Add([]byte("q1 Q0 d1 1 0.5 t\n"))
	f.Add([]byte(`{"q1": {"d1": 0.5}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		run, _, err := ReadRun(strings.NewReader(string(data)), "f")
		if err == nil && len(run) == 0 {
			t.Fatal("no error and no results")
		}
	})
}

func FuzzReadQrels(f *testing.F) {
	f.Add([]byte("q1 0 d1 1\n"))
	f.Add([]byte("query-id\tcorpus-id\tscore\nq\td\t1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		q, _, err := ReadQrels(strings.NewReader(string(data)), "f")
		if err == nil && len(q) == 0 {
			t.Fatal("no error and no judgements")
		}
	})
}
