package main

import (
	"go/parser"
	"go/token"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
)

// synthetic draws n rows of d standard normal features and labels from the logistic model
// with the given weights and bias (fixed seed).
func synthetic(n int, w []float64, bias float64, seed uint64) ([][]float64, []bool) {
	r := rand.New(rand.NewPCG(seed, 0))
	x := make([][]float64, n)
	y := make([]bool, n)
	for i := range n {
		x[i] = make([]float64, len(w))
		z := bias
		for j := range w {
			x[i][j] = r.NormFloat64()
			z += w[j] * x[i][j]
		}
		y[i] = r.Float64() < 1/(1+math.Exp(-z))
	}
	return x, y
}

func TestFitLogisticRecoversWeights(t *testing.T) {
	want := []float64{2, -1, 0}
	x, y := synthetic(20000, want, 0.5, 1)
	m := fitLogistic(x, y, fitOptions{lambda: 0.01})
	// Standardised weights: the features are standard normal, so w·scale ≈ w.
	for j, w := range want {
		if got := m.Weights[j] / m.Scale[j]; math.Abs(got-w) > 0.1 {
			t.Errorf("weight %d = %.3f, want %.1f ± 0.1", j, got, w)
		}
	}
	// The bias is in standardised coordinates: bias − Σ w·mean/scale is the raw intercept.
	raw := m.Bias
	for j := range want {
		raw -= m.Weights[j] * m.Mean[j] / m.Scale[j]
	}
	if math.Abs(raw-0.5) > 0.1 {
		t.Errorf("intercept %.3f, want 0.5 ± 0.1", raw)
	}
	// Deterministic: the same data gives the same model bit for bit.
	again := fitLogistic(x, y, fitOptions{lambda: 0.01})
	for j := range want {
		if again.Weights[j] != m.Weights[j] {
			t.Fatalf("refit differs: %v vs %v", again.Weights, m.Weights)
		}
	}
}

func TestFitLogisticPenaltyShrinks(t *testing.T) {
	x, y := synthetic(500, []float64{1.5}, 0, 2)
	loose := fitLogistic(x, y, fitOptions{lambda: 0.01})
	tight := fitLogistic(x, y, fitOptions{lambda: 1000})
	if !(math.Abs(tight.Weights[0]) < math.Abs(loose.Weights[0])/2) {
		t.Errorf("lambda 1000 weight %.3f not well below lambda 0.01 weight %.3f", tight.Weights[0], loose.Weights[0])
	}
}

func TestFitLogisticNoBiasIsAntisymmetric(t *testing.T) {
	x, y := synthetic(2000, []float64{1, -2}, 0, 3)
	// Mirror every row, as the pairwise training does.
	for i := range len(x) {
		x = append(x, []float64{-x[i][0], -x[i][1]})
		y = append(y, !y[i])
	}
	m := fitLogistic(x, y, fitOptions{lambda: 0.1, noBias: true})
	if m.Bias != 0 || m.Mean[0] != 0 || m.Mean[1] != 0 {
		t.Fatalf("no-bias model has bias %v, mean %v", m.Bias, m.Mean)
	}
	a := []float64{0.3, -0.7}
	p, q := m.Prob(a), m.Prob([]float64{-0.3, 0.7})
	if math.Abs(p+q-1) > 1e-12 {
		t.Errorf("P(x) + P(−x) = %v, want 1", p+q)
	}
}

func TestSolve(t *testing.T) {
	a := [][]float64{{4, 1, 0}, {1, 3, 1}, {0, 1, 2}}
	want := []float64{1, -2, 3}
	b := make([]float64, 3)
	for i := range a {
		for j := range a {
			b[i] += a[i][j] * want[j]
		}
	}
	got := solve(a, b)
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("solve = %v, want %v", got, want)
		}
	}
}

func TestShiftBiasMovesTheDecision(t *testing.T) {
	m := builtin.Logistic{Mean: []float64{0}, Scale: []float64{1}, Weights: []float64{2}, Bias: 0.3}
	x := []float64{0.4}
	p := m.Prob(x)
	s := shiftBias(m, p)
	if got := s.Prob(x); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("after the shift P = %v, want 0.5", got)
	}
	if got := shiftProb(p, p); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("shiftProb(p, p) = %v", got)
	}
}

func TestSelectionKeepsSignalDropsNoise(t *testing.T) {
	// Feature 0 carries the label, features 1 and 2 are noise.
	x, y := synthetic(1500, []float64{1.5, 0, 0}, 0, 4)
	src := make([]string, len(x))
	for i := range src {
		src[i] = string(rune('a' + i%40)) // 40 "sources" spread over the folds
	}
	var log strings.Builder
	m, _, oof := selectAndFit(&log, x, y, src, fitOptions{}, []string{"signal", "noise1", "noise2"})
	if m.Weights[0] <= 0 || m.Weights[1] != 0 || m.Weights[2] != 0 {
		t.Errorf("weights %v: want only the signal selected (positive)\n%s", m.Weights, log.String())
	}
	if len(oof) != len(x) {
		t.Fatalf("%d out-of-fold predictions for %d rows", len(oof), len(x))
	}
}

func TestProvenanceAndGeneratedSource(t *testing.T) {
	dir := t.TempDir()
	for _, f := range dataFiles {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prov, err := provenance(dir)
	if err != nil {
		t.Fatal(err)
	}
	// sha256("abc")
	const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if len(prov) != len(dataFiles) || prov[0] != "begin/begin_dev_wow.tsv 3 bytes sha256 "+abc {
		t.Fatalf("provenance %q", prov)
	}
	m := builtin.Logistic{Bias: -0.25, Mean: make([]float64, len(builtin.ClaimFeatureNames)), Scale: make([]float64, len(builtin.ClaimFeatureNames)), Weights: make([]float64, len(builtin.ClaimFeatureNames))}
	for i := range m.Scale {
		m.Scale[i], m.Weights[i] = 1, 0.1234567890123*float64(i)
	}
	src := string(generate(prov, m, 0.8))
	if _, err := parser.ParseFile(token.NewFileSet(), "model_fit.go", src, 0); err != nil {
		t.Fatalf("generated source does not parse: %v\n%s", err, src)
	}
	for _, want := range []string{
		"// Code generated by `go run ./scripts/trainbuiltin -data ../shared/data`; DO NOT EDIT.",
		"begin/begin_dev_wow.tsv 3 bytes sha256 " + abc,
		"ragtruth/ragtruth_summary.jsonl 3 bytes sha256 " + abc,
		"var CitationModel = Logistic{",
		"Bias: -0.25,",
		"0.6172839451, // missing_numbers",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("generated source lacks %q:\n%s", want, src)
		}
	}
}

func TestProvenanceMissingFile(t *testing.T) {
	if _, err := provenance(t.TempDir()); err == nil || !strings.Contains(err.Error(), "begin_dev_wow.tsv") {
		t.Fatalf("err = %v, want the missing file named", err)
	}
}
