package eval

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lenScorer scores "len" = len(answer)/10 and fails "judge" with parse_error when the answer
// holds "bad": a real Scorer, deterministic so values can be checked exactly.
type lenScorer struct{}

func (lenScorer) Name() string { return "len" }
func (lenScorer) Score(_ context.Context, r *record.Record) ([]score.Result, error) {
	out := []score.Result{{TraceID: r.TraceID, Metric: "len", Value: float64(len(r.Answer)) / 10}}
	if strings.Contains(r.Answer, "bad") {
		return out, score.Failure{{Metric: "judge", Outcome: score.OutcomeParseError, Err: errors.New("x")}}
	}
	return append(out, score.Result{TraceID: r.TraceID, Metric: "judge", Value: 1}), nil
}

func TestRun(t *testing.T) {
	in := strings.Join([]string{
		`{"trace_id":"a","query":"q","answer":"12345","extra_field":{"ignored":true}}`,
		``,
		`{"query":"q","answer":"1234567890"}`,
		`{"trace_id":"c","query":"q","answer":"bad"}`,
		`not json`,
		`{"trace_id":"d"}`,
		`{"trace_id":"e","answer":"12","span_id":"s"}`,
	}, "\n")
	var out, progress bytes.Buffer
	now := time.Unix(0, 0)
	rep, err := Run(context.Background(), strings.NewReader(in), &out, Options{Scorers: []score.Scorer{lenScorer{}},
		Concurrency: 2, Progress: &progress, ProgressEvery: time.Nanosecond,
		Now: func() time.Time { now = now.Add(time.Second); return now }})
	if err != nil {
		t.Fatal(err)
	}
	wantOut := `{"trace_id":"a","scores":{"judge":1,"len":0.5}}
{"trace_id":"line-3","scores":{"judge":1,"len":1}}
{"trace_id":"c","scores":{"len":0.3},"errors":{"judge":"parse_error"}}
{"trace_id":"e/s","scores":{"judge":1,"len":0.2}}
`
	if out.String() != wantOut {
		t.Fatalf("output\n%s\nwant\n%s", out.String(), wantOut)
	}
	wantBad := []string{
		"line 5: invalid JSON: invalid character 'o' in literal null (expecting 'u')",
		"line 6: record: needs at least one of query, answer or documents",
	}
	if rep.Records != 4 || !reflect.DeepEqual(rep.BadLines, wantBad) {
		t.Fatalf("records %d bad %q", rep.Records, rep.BadLines)
	}
	if !strings.HasPrefix(progress.String(), "scored 4 records (") {
		t.Fatalf("progress %q", progress.String())
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	// len: 0.5, 1, 0.3, 0.2: mean 0.5, sd 0.35590, t(3) = 3.182 → ±0.56626, clipped to [0, 1].
	wantTable := `metric                          n    mean            95% CI  errors
judge                           3  1.0000  [1.0000, 1.0000]       1
len                             4  0.5000  [0.0000, 1.0000]       0
`
	if table.String() != wantTable {
		t.Fatalf("table\n%s\nwant\n%s", table.String(), wantTable)
	}
}

func TestSummarize(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(i%2) * 0.5 // 50 zeros, 50 halves: mean 0.25, sd 0.2513
	}
	s := Summarize(v)
	sd := math.Sqrt(50 * 0.0625 * 2 / 99)
	if s.N != 100 || s.Mean != 0.25 || math.Abs(s.Lo-(0.25-1.96*sd/10)) > 1e-12 || math.Abs(s.Hi-(0.25+1.96*sd/10)) > 1e-12 {
		t.Fatalf("%+v", s)
	}
	if s := Summarize([]float64{0.4, 0.6}); math.Abs(s.Lo) > 0 || s.Hi != 1 || math.Abs(s.Mean-0.5) > 1e-15 {
		t.Fatalf("two values: %+v (t=12.706 makes the interval cover [0,1])", s)
	}
	if s := Summarize([]float64{0.3}); s.Lo != 0.3 || s.Hi != 0.3 {
		t.Fatalf("%+v", s)
	}
}

func TestBaselineGate(t *testing.T) {
	rep := &Report{Metrics: []Summary{{Metric: "faithfulness", N: 10, Mean: 0.78}, {Metric: "mrr", N: 10, Mean: 0.5}, {Metric: "new", N: 3, Mean: 0.1}}}
	base := Baseline{Metrics: map[string]Summary{
		"faithfulness": {Mean: 0.80}, "mrr": {Mean: 0.60}, "gone": {Mean: 0.9},
	}}
	got := rep.Gate(base, 0.02)
	want := []string{
		"gone: missing from this run (baseline mean 0.9000)",
		"mrr: dropped 0.1000 (0.6000 -> 0.5000, allowed 0.0200)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	path := filepath.Join(t.TempDir(), "b.json")
	if err := WriteBaseline(path, rep.Baseline()); err != nil {
		t.Fatal(err)
	}
	b, err := ReadBaseline(path)
	if err != nil || len(b.Metrics) != 3 || b.Metrics["mrr"].Mean != 0.5 {
		t.Fatalf("%+v %v", b, err)
	}
	if fails := rep.Gate(b, 0); fails != nil {
		t.Fatalf("same run against its own baseline: %v", fails)
	}
	if _, err := ReadBaseline(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Fatal("missing file accepted")
	}
}

// histScorer scores "hist" = messages in the record's history / 10.
type histScorer struct{}

func (histScorer) Name() string { return "hist" }
func (histScorer) Score(_ context.Context, r *record.Record) ([]score.Result, error) {
	return []score.Result{{Metric: "hist", Value: float64(len(r.History)) / 10}}, nil
}

func TestRunByTurn(t *testing.T) {
	in := strings.Join([]string{
		`{"trace_id":"a","query":"q","answer":"a","turn":1}`,
		`{"trace_id":"b","query":"q","answer":"a","turn":2,"history":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}`,
		`{"trace_id":"c","query":"q","answer":"a","turn":3,"history":[{"role":"user","content":"x"},{"role":"assistant","content":"y"},{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}`,
		`{"trace_id":"d","query":"q","answer":"a","turn":5,"history":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}`,
		`{"trace_id":"e","query":"q","answer":"a"}`,
	}, "\n")
	for _, noHistory := range []bool{false, true} {
		var out bytes.Buffer
		rep, err := Run(context.Background(), strings.NewReader(in), &out, Options{Scorers: []score.Scorer{histScorer{}}, NoHistory: noHistory})
		if err != nil {
			t.Fatal(err)
		}
		want := []TurnSummary{
			{"1", Summary{Metric: "hist", N: 1}},
			{"2", Summary{Metric: "hist", N: 1, Mean: 0.2, Lo: 0.2, Hi: 0.2}},
			{"3-5", Summary{Metric: "hist", N: 2, Mean: 0.3, Lo: 0, Hi: 1}},
		}
		if noHistory {
			want[1].Mean, want[1].Lo, want[1].Hi = 0, 0, 0
			want[2].Mean, want[2].Hi = 0, 0
		}
		for i := range rep.ByTurn {
			rep.ByTurn[i].Mean = math.Round(rep.ByTurn[i].Mean*1e9) / 1e9
			rep.ByTurn[i].Lo = math.Round(rep.ByTurn[i].Lo*1e9) / 1e9
			rep.ByTurn[i].Hi = math.Round(rep.ByTurn[i].Hi*1e9) / 1e9
		}
		if !reflect.DeepEqual(rep.ByTurn, want) {
			t.Errorf("no history %v: by turn %+v, want %+v", noHistory, rep.ByTurn, want)
		}
		if !strings.Contains(out.String(), `{"trace_id":"c","turn":3,"scores"`) {
			t.Errorf("lines lack the turn:\n%s", out.String())
		}
		var table bytes.Buffer
		rep.WriteTable(&table)
		if !strings.Contains(table.String(), "by turn") || !strings.Contains(table.String(), "hist                         3-5      2") {
			t.Errorf("table:\n%s", table.String())
		}
	}
}
