package retrieval

import (
	"bufio"
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
)

// loadFixture reads testdata/<name>.qrels and .run and returns, per query, the labels and the
// ranking in trec_eval's order: by score, highest first (ties by docno, descending).
func loadFixture(t *testing.T, name string) (map[string]map[string]int, map[string][]string) {
	t.Helper()
	qrels := map[string]map[string]int{}
	for _, f := range readFields(t, name+".qrels") {
		g, err := strconv.Atoi(f[3])
		if err != nil {
			t.Fatal(err)
		}
		if qrels[f[0]] == nil {
			qrels[f[0]] = map[string]int{}
		}
		qrels[f[0]][f[2]] = g
	}
	type entry struct {
		doc   string
		score float64
	}
	runs := map[string][]entry{}
	for _, f := range readFields(t, name+".run") {
		s, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			t.Fatal(err)
		}
		runs[f[0]] = append(runs[f[0]], entry{f[2], s})
	}
	ranked := map[string][]string{}
	for q, es := range runs {
		sort.SliceStable(es, func(i, j int) bool {
			if es[i].score != es[j].score {
				return es[i].score > es[j].score
			}
			return es[i].doc > es[j].doc
		})
		for _, e := range es {
			ranked[q] = append(ranked[q], e.doc)
		}
	}
	return qrels, ranked
}

func readFields(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' }))
	}
	return out
}

// TestTrecEvalExpected checks every measure of expected.tsv that ragwatch defines.
func TestTrecEvalExpected(t *testing.T) {
	checked := 0
	for _, row := range readFields(t, "expected.tsv") {
		fixture, measure, qid := row[0], row[1], row[2]
		want, err := strconv.ParseFloat(row[3], 64)
		if err != nil {
			t.Fatal(err)
		}
		var metric func(ranked []string, qrels map[string]int) float64
		switch {
		case measure == "nDCG":
			metric = func(r []string, q map[string]int) float64 { v, _ := NDCG(r, q, 0); return v }
		case strings.HasPrefix(measure, "nDCG@"):
			k, _ := strconv.Atoi(strings.TrimPrefix(measure, "nDCG@"))
			metric = func(r []string, q map[string]int) float64 { v, _ := NDCG(r, q, k); return v }
		case strings.HasPrefix(measure, "P@"):
			k, _ := strconv.Atoi(strings.TrimPrefix(measure, "P@"))
			metric = func(r []string, q map[string]int) float64 { return Precision(r, q, k) }
		case strings.HasPrefix(measure, "Success@"):
			k, _ := strconv.Atoi(strings.TrimPrefix(measure, "Success@"))
			metric = func(r []string, q map[string]int) float64 { return Hit(r, q, k) }
		default:
			continue // judged-only precision, custom gains and rel= thresholds are not ragwatch metrics
		}
		t.Run(fixture+"/"+measure+"/"+qid, func(t *testing.T) {
			qrels, runs := loadFixture(t, fixture)
			var got float64
			if qid == "all" {
				ids := make([]string, 0, len(runs))
				for q := range runs {
					ids = append(ids, q)
				}
				for _, q := range ids {
					got += metric(runs[q], qrels[q])
				}
				got /= float64(len(ids))
			} else {
				got = metric(runs[qid], qrels[qid])
			}
			if math.Abs(got-want) > 1e-5 { // expected.tsv holds 5 decimals
				t.Fatalf("%s %s q%s = %.6f, want %.5f", fixture, measure, qid, got, want)
			}
		})
		checked++
	}
	if checked != 9 {
		t.Fatalf("checked %d rows of expected.tsv, want 9", checked)
	}
}

// TestHandWorked: labels d1=3, d2=0, d3=1, d4=2, d5=-1; ranking d2 d1 x d4 d5.
func TestHandWorked(t *testing.T) {
	qrels := map[string]int{"d1": 3, "d2": 0, "d3": 1, "d4": 2, "d5": -1}
	ranked := []string{"d2", "d1", "x", "d4", "d5"}
	l2 := math.Log2
	// DCG@5 = 3/log2(3) + 2/log2(5); ideal = 3/1 + 2/log2(3) + 1/2.
	dcg5 := 3/l2(3) + 2/l2(5)
	want := map[string]float64{
		"mrr":         0.5,
		"precision@1": 0, "hit@1": 0, "recall@1": 0, "ndcg@1": 0,
		"precision@3": 1.0 / 3, "hit@3": 1, "recall@3": 1.0 / 3, "ndcg@3": (3 / l2(3)) / (3 + 2/l2(3) + 1.0/2),
		"precision@5": 2.0 / 5, "hit@5": 1, "recall@5": 2.0 / 3, "ndcg@5": dcg5 / (3 + 2/l2(3) + 1.0/2),
		"precision@10": 2.0 / 10, "hit@10": 1, "recall@10": 2.0 / 3, "ndcg@10": dcg5 / (3 + 2/l2(3) + 1.0/2),
	}
	got := Compute(ranked, qrels, DefaultK)
	if len(got) != len(want) {
		t.Fatalf("got %d metrics %v, want %d", len(got), got, len(want))
	}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-12 {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	if math.Abs(got["ndcg@3"]-0.3974895223) > 1e-9 {
		t.Errorf("ndcg@3 = %.10f, want 0.3974895223 (worked by hand)", got["ndcg@3"])
	}
}

func TestNoRelevantLabels(t *testing.T) {
	got := Compute([]string{"a", "b"}, map[string]int{"a": 0, "b": -1}, []int{2})
	want := map[string]float64{"mrr": 0, "precision@2": 0, "hit@2": 0}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v (recall and ndcg are undefined without relevant labels)", got, want)
	}
}

func TestScorer(t *testing.T) {
	s := New([]int{2}, func(m string) bool { return m != "hit@2" })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.now = func() time.Time { return now }
	r := &record.Record{TraceID: "t1", Service: "svc",
		Documents: []record.Document{{ID: "a"}, {ID: "b"}, {ID: "a"}, {ID: "c"}},
		Relevance: map[string]int{"b": 1, "c": 2}, Sampling: &record.Sampling{Probability: 0.25}}
	res, err := s.Score(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range res {
		names = append(names, x.Metric)
		if x.TraceID != "t1" || x.Service != "svc" || x.Scorer != "retrieval" || x.Weight != 4 || !x.Time.Equal(now) {
			t.Fatalf("result %+v", x)
		}
	}
	if want := []string{"mrr", "ndcg@2", "precision@2", "recall@2"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("metrics %v, want %v", names, want)
	}
	if res[0].Value != 0.5 || res[2].Value != 0.5 || res[3].Value != 0.5 {
		t.Fatalf("values %+v", res)
	}
	none, err := s.Score(context.Background(), &record.Record{TraceID: "t2", Documents: r.Documents})
	if err != nil || none != nil {
		t.Fatalf("record without labels: %v %v", none, err)
	}
}

// TestAveragePrecision: labels d1=3 d3=1 d4=2 relevant (3), ranking d2 d1 x d4 d5 retrieves d1 at
// rank 2 and d4 at rank 4: (1/2 + 2/4) / 3, d3 unretrieved counting 0 (trec_eval's map).
func TestAveragePrecision(t *testing.T) {
	qrels := map[string]int{"d1": 3, "d2": 0, "d3": 1, "d4": 2, "d5": -1}
	v, ok := AveragePrecision([]string{"d2", "d1", "x", "d4", "d5"}, qrels)
	if !ok || math.Abs(v-(0.5+0.5)/3) > 1e-12 {
		t.Fatalf("AP = %v, %v; want 1/3", v, ok)
	}
	if v, ok := AveragePrecision([]string{"a"}, map[string]int{"a": 0}); ok || v != 0 {
		t.Fatalf("no relevant label: %v, %v; want 0, false", v, ok)
	}
}
