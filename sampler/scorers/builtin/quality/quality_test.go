package quality

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestROCAUC(t *testing.T) {
	tests := []struct {
		name   string
		scores []float64
		pos    []bool
		want   float64
	}{
		{"perfect", []float64{0.9, 0.8, 0.2, 0.1}, []bool{true, true, false, false}, 1},
		{"inverted", []float64{0.1, 0.2, 0.8, 0.9}, []bool{true, true, false, false}, 0},
		{"all tied", []float64{0.5, 0.5, 0.5, 0.5}, []bool{true, false, true, false}, 0.5},
		// pairs (pos, neg): (0.8,0.6) win, (0.8,0.3) win, (0.4,0.6) loss, (0.4,0.3) win → 3/4.
		{"mixed", []float64{0.8, 0.4, 0.6, 0.3}, []bool{true, true, false, false}, 0.75},
		// (0.5,0.5) tie counts half: (0.9,0.5) 1 + (0.5,0.5) 0.5 → 1.5/2.
		{"tie counts half", []float64{0.9, 0.5, 0.5}, []bool{true, true, false}, 0.75},
		{"one class", []float64{0.1, 0.2}, []bool{true, true}, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ROCAUC(tt.scores, tt.pos); got != tt.want {
				t.Errorf("ROCAUC = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	ex := []Example{{Hallucinated: true}, {Hallucinated: true}, {Hallucinated: false}, {Hallucinated: false}, {Hallucinated: true}}
	scores := []float64{0.2, 0.6, 0.3, 0.9, 0.1}
	got := Compare(ex, scores, 0.5)
	// predicted hallucinated: 0.2 (TP), 0.3 (FP), 0.1 (TP); missed: 0.6 (FN).
	want := Report{N: 5, Hallucinated: 3, Threshold: 0.5, TP: 2, FP: 1, FN: 1,
		Precision: 2.0 / 3, Recall: 2.0 / 3, F1: 2.0 / 3,
		// faithful scores {0.3, 0.9} vs hallucinated {0.2, 0.6, 0.1}: wins 0.3>0.2, 0.3>0.1,
		// 0.9 beats all three → 5/6.
		AUC: 5.0 / 6}
	if got.AUC-want.AUC > 1e-12 || want.AUC-got.AUC > 1e-12 || got.F1-want.F1 > 1e-12 || want.F1-got.F1 > 1e-12 {
		t.Errorf("Compare = %+v, want %+v", got, want)
	}
	got.AUC, got.F1 = want.AUC, want.F1
	if got != want {
		t.Errorf("Compare = %+v, want %+v", got, want)
	}
}

func TestLoaders(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "begin"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "ragtruth"), 0o755))
	header := "model_name\tdata_source\tknowledge\tmessage\tresponse\tbegin_label\n"
	must(os.WriteFile(filepath.Join(dir, "begin/begin_dev_wow.tsv"), []byte(header+
		"t5\twow\tK1\tM1\tR1\tFully attributable\n"+
		"t5\twow\tK2\tM2\tR2\tNot fully attributable\r\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "begin/begin_dev_cmu.tsv"), []byte(header+
		"t5\tcmu\tK3\tM3\tR3\tGeneric \n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "ragtruth/ragtruth_summary.jsonl"), []byte(
		`{"source_id":"1","source":"S1","responses":[{"response":"A","labels":[]},{"response":"B","labels":[{"implicit_true":true}]},{"response":"Café C. Dx","labels":[{"start":0,"end":4,"implicit_true":true},{"start":8,"end":10,"implicit_true":false}]}]}`+"\n"), 0o644))
	got, err := LoadAll(dir)
	must(err)
	want := []Split{
		{"begin-wow", []Example{{"K1", "R1", false, nil}, {"K2", "R2", true, nil}}},
		{"begin-cmu", []Example{{"K3", "R3", true, nil}}},
		{"ragtruth-summary", []Example{{"S1", "A", false, nil}, {"S1", "B", false, nil}, {"S1", "Café C. Dx", true, [][2]int{{9, 11}}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadAll:\n got %+v\nwant %+v", got, want)
	}

	must(os.WriteFile(filepath.Join(dir, "bad.tsv"), []byte(header+"a\tb\tc\td\te\tMaybe\n"), 0o644))
	if _, err := LoadBEGIN(filepath.Join(dir, "bad.tsv")); err == nil || !strings.Contains(err.Error(), `bad.tsv:2: unknown label "Maybe"`) {
		t.Errorf("bad label: %v", err)
	}
	must(os.WriteFile(filepath.Join(dir, "short.tsv"), []byte(header+"a\tb\tc\n"), 0o644))
	if _, err := LoadBEGIN(filepath.Join(dir, "short.tsv")); err == nil || !strings.Contains(err.Error(), "short.tsv:2: 3 fields, want 6") {
		t.Errorf("short row: %v", err)
	}
	must(os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte("{\"source\": 1}\n"), 0o644))
	if _, err := LoadRAGTruth(filepath.Join(dir, "bad.jsonl")); err == nil || !strings.Contains(err.Error(), "item 1") {
		t.Errorf("bad json: %v", err)
	}
}

func TestLabelClaims(t *testing.T) {
	e := Example{Answer: "Rates rose. Prices fell sharply. Wages held.", Hallucinated: true, Spans: [][2]int{{19, 31}}}
	got, missing := LabelClaims(e, []string{"Rates rose.", "Prices fell sharply.", "Not there.", "Wages held."})
	want := []Claim{{"Rates rose.", false}, {"Prices fell sharply.", true}, {"Not there.", true}, {"Wages held.", false}}
	if !reflect.DeepEqual(got, want) || missing != 1 {
		t.Errorf("LabelClaims = %+v, %d; want %+v, 1", got, missing, want)
	}
}

func TestBootstrapAUC(t *testing.T) {
	ex := []Example{{Hallucinated: false}, {Hallucinated: false}, {Hallucinated: true}, {Hallucinated: true}}
	perfect := []float64{0.9, 0.8, 0.2, 0.1}
	constant := []float64{0.5, 0.5, 0.5, 0.5}
	ia, ib, d := BootstrapAUC(ex, perfect, constant, 200, 1)
	// Every resample: perfect separation (or one class only: 0.5); constant scores: 0.5.
	if ia.Hi != 1 || ia.Lo != 0.5 && ia.Lo != 1 {
		t.Errorf("perfect: %+v", ia)
	}
	if ib != (Interval{0.5, 0.5}) {
		t.Errorf("constant: %+v", ib)
	}
	if d.Hi != 0.5 {
		t.Errorf("difference: %+v", d)
	}
	ia2, _, _ := BootstrapAUC(ex, perfect, constant, 200, 1)
	if ia2 != ia {
		t.Errorf("same seed, different interval: %+v vs %+v", ia2, ia)
	}
}

// FNV-1a (32 bit) of "a" is 0xe40c292c (even), of "b" 0xe70c2de5 (odd): answers to one context
// stay together in one half.
func TestHalves(t *testing.T) {
	ex := []Example{{Context: "a", Answer: "1"}, {Context: "b", Answer: "2"}, {Context: "a", Answer: "3"}}
	dev, held := Halves(ex)
	if want := []Example{ex[0], ex[2]}; !reflect.DeepEqual(dev, want) {
		t.Errorf("dev = %v, want %v", dev, want)
	}
	if want := []Example{ex[1]}; !reflect.DeepEqual(held, want) {
		t.Errorf("held = %v, want %v", held, want)
	}
}
