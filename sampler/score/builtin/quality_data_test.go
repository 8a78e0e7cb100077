package builtin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ragwatch/ragwatch/collector/record"
	"github.com/ragwatch/ragwatch/sampler/score/builtin/quality"
)

// sharedData finds ../shared/data beside the repository root (as CI lays it out).
func sharedData(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
	data := filepath.Join(dir, "..", "shared", "data")
	if _, err := os.Stat(data); os.IsNotExist(err) {
		t.Skipf("%s is missing: quality regression not run", data)
	}
	return data
}

func faithfulnessScore(e quality.Example) float64 {
	v, _, ok := Faithfulness(e.Answer, []record.Document{{ID: "context", Content: e.Context}})
	if !ok {
		return 1
	}
	return v
}

// TestQualityRegression pins the agreement of faithfulness with human labels (see
// docs/scorer-quality.md for the figures): a change to claim splitting or support that loses
// more than a small margin of ROC AUC fails here.
func TestQualityRegression(t *testing.T) {
	splits, err := quality.LoadAll(sharedData(t))
	if err != nil {
		t.Fatal(err)
	}
	floors := map[string]float64{ // measured figure minus 0.01
		"begin-wow":        0.926,
		"begin-cmu":        0.921,
		"ragtruth-summary": 0.683,
	}
	for _, sp := range splits {
		r := quality.Evaluate(sp.Examples, DefaultThreshold, faithfulnessScore)
		base := quality.Evaluate(sp.Examples, DefaultThreshold, func(e quality.Example) float64 {
			return WordOverlap(e.Answer, []record.Document{{ID: "context", Content: e.Context}})
		})
		t.Logf("%s: n=%d hallucinated=%d AUC %.3f (word overlap %.3f) P %.3f R %.3f F1 %.3f",
			sp.Name, r.N, r.Hallucinated, r.AUC, base.AUC, r.Precision, r.Recall, r.F1)
		if r.AUC < floors[sp.Name] {
			t.Errorf("%s: faithfulness ROC AUC %.3f fell below %.3f", sp.Name, r.AUC, floors[sp.Name])
		}
		if sp.Name == "ragtruth-summary" && r.AUC <= base.AUC {
			t.Errorf("%s: faithfulness ROC AUC %.3f does not beat word overlap %.3f", sp.Name, r.AUC, base.AUC)
		}
	}
}
