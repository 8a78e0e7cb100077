package eval

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

func fp(v float64) *float64 { return &v }

func TestGateFloorsAndTolerances(t *testing.T) {
	rep := &Report{Metrics: []Summary{
		{Metric: "faithfulness", N: 10, Mean: 0.78},
		{Metric: "mrr", N: 5, Mean: 0.9},
		{Metric: "citation_precision", N: 5, Mean: 0.70},
		{Metric: "context_recall", N: 0, Errors: 5},
	}}
	base := &Baseline{Metrics: map[string]Summary{
		"faithfulness":       {Metric: "faithfulness", N: 10, Mean: 0.81},
		"mrr":                {Metric: "mrr", N: 5, Mean: 0.95},
		"citation_precision": {Metric: "citation_precision", N: 5, Mean: 0.72},
	}}
	gate := Gate{
		"faithfulness":      {Min: fp(0.8), MaxDrop: fp(0.05)}, // 0.78 < 0.8 fails; drop 0.03 passes
		"mrr":               {MaxDrop: fp(0.04)},               // drop 0.05 fails
		"context_recall":    {Min: fp(0.5)},                    // no values this run
		"answer_similarity": {Min: fp(0.7), MaxDrop: fp(0.1)},  // not in the run either
	}
	// citation_precision is only in the baseline: the default tolerance 0.02 applies (drop 0.02 passes).
	got := rep.Check(base, gate, 0.02)
	want := []string{
		"answer_similarity: missing from this run",
		"context_recall: missing from this run",
		"faithfulness: mean 0.7800 is below the floor 0.8000",
		"mrr: dropped 0.0500 (0.9500 -> 0.9000, allowed 0.0400)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("failures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Floors alone need no baseline; a value exactly at the floor passes.
	if got := rep.Check(nil, Gate{"faithfulness": {Min: fp(0.78)}, "mrr": {Min: fp(0.5)}}, 0); len(got) != 0 {
		t.Fatalf("floors at the value failed: %v", got)
	}
}

func TestReadGate(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "gate.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	g, err := ReadGate(write(`{"faithfulness": {"min": 0.8, "max_drop": 0.02}, "mrr": {"min": 0.5}}`))
	if err != nil || *g["faithfulness"].Min != 0.8 || *g["faithfulness"].MaxDrop != 0.02 || g["mrr"].MaxDrop != nil || !g.NeedsBaseline() {
		t.Fatalf("gate %+v, %v", g, err)
	}
	for body, want := range map[string]string{
		`{"faithfulness": {"floor": 0.8}}`: `unknown field "floor"`,
		`{"faithfulness": {"min": 1.5}}`:   "faithfulness: `min` must be between 0 and 1, got 1.5",
		`{"faithfulness": {}}`:             "faithfulness: needs `min` or `max_drop`",
		`{}`:                               "holds no metrics",
	} {
		if _, err := ReadGate(write(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
}

// fixed scores every record's faithfulness with the value in its attribute "judge".
type fixed struct{}

func (fixed) Name() string { return "openai" }
func (fixed) Score(_ context.Context, r *record.Record) ([]score.Result, error) {
	var v float64
	switch r.Attributes["judge"] {
	case "0.8":
		v = 0.8
	case "0.4":
		v = 0.4
	case "0.6":
		v = 0.6
	case "0.3":
		v = 0.3
	case "0.9":
		v = 0.9
	}
	return []score.Result{{TraceID: r.TraceID, Metric: "faithfulness", Value: v, Scorer: "openai"}}, nil
}

// The worked example of internal/agreement as an eval input: five labelled records.
func TestEvalAgreementWithLabels(t *testing.T) {
	in := `{"trace_id":"1","query":"q","attributes":{"judge":"0.8"},"labels":{"values":{"faithfulness":0.9}}}
{"trace_id":"2","query":"q","attributes":{"judge":"0.4"},"labels":{"values":{"faithfulness":0.2}}}
{"trace_id":"3","query":"q","attributes":{"judge":"0.6"},"labels":{"values":{"faithfulness":0.6}}}
{"trace_id":"4","query":"q","attributes":{"judge":"0.3"},"labels":{"values":{"faithfulness":0.6}}}
{"trace_id":"5","query":"q","attributes":{"judge":"0.9"},"labels":{"values":{"faithfulness":1.0}}}
{"trace_id":"6","query":"q","attributes":{"judge":"0.9"}}
`
	rep, err := Run(context.Background(), strings.NewReader(in), nil, Options{Scorers: []score.Scorer{fixed{}}})
	if err != nil || len(rep.BadLines) > 0 {
		t.Fatal(err, rep.BadLines)
	}
	if len(rep.Agreement) != 1 {
		t.Fatalf("agreement rows %+v", rep.Agreement)
	}
	a := rep.Agreement[0]
	if a.Metric != "faithfulness" || a.Judge != "openai" || a.N != 5 {
		t.Fatalf("row %+v", a)
	}
	var b strings.Builder
	rep.WriteAgreement(&b)
	for _, want := range []string{"agreement with human labels", "0.140 [0.040, 0.240]", "0.821 [-0.261, 0.989]", "0.545 [-0.251, 1.000]"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	// Without labels nothing is printed.
	rep, _ = Run(context.Background(), strings.NewReader(`{"trace_id":"6","query":"q"}`), nil, Options{Scorers: []score.Scorer{fixed{}}})
	b.Reset()
	rep.WriteAgreement(&b)
	if b.Len() != 0 {
		t.Errorf("printed %q for unlabelled input", b.String())
	}
}
