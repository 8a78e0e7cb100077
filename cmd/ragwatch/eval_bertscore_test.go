package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `ragwatch eval` scores BERTScore through a text-embeddings-inference server: here one whose
// token vectors are one-hot by word, so every shared word matches at cosine 1 and the others
// at 0 ([CLS] and [SEP] weigh nothing but share one vector across texts).
func TestEvalBERTScore(t *testing.T) {
	vocab := map[string]int{}
	tei := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Inputs []string `json:"inputs"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		const dim = 32
		var toks []any
		var embs [][][]float64
		for _, text := range in.Inputs {
			words := strings.Fields(strings.ToLower(strings.Trim(text, ".")))
			ts := []map[string]any{{"id": 101, "text": "[CLS]", "special": true}}
			e := [][]float64{onehot(dim, 0)}
			for _, wd := range words {
				if _, ok := vocab[wd]; !ok {
					vocab[wd] = len(vocab) + 1
				}
				ts = append(ts, map[string]any{"id": 1000 + vocab[wd], "text": wd, "special": false})
				e = append(e, onehot(dim, vocab[wd]))
			}
			ts = append(ts, map[string]any{"id": 102, "text": "[SEP]", "special": true})
			toks = append(toks, ts)
			embs = append(embs, append(e, onehot(dim, 0)))
		}
		if r.URL.Path == "/tokenize" {
			json.NewEncoder(w).Encode(toks)
			return
		}
		json.NewEncoder(w).Encode(embs)
	}))
	defer tei.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ragwatch.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("scoring:\n  metrics: [faithfulness]\n  retrieval_k: []\n  bertscore: {enabled: true, url: %q}\n", tei.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "records.jsonl")
	// Answer "the cat sat" vs reference "the cat sat down": P = 3/3, R = 3/4, F1 = 6/7.
	if err := os.WriteFile(in, []byte(`{"trace_id":"r1","query":"q","answer":"The cat sat","reference":"The cat sat down"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runEvalCmd("-c", cfg, "--input", in)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"\nbertscore_f1                    1  0.8571 ", "\nbertscore_precision             1  1.0000 ", "\nbertscore_recall                1  0.7500 "} {
		if !strings.Contains(out, want) {
			t.Fatalf("stdout lacks %q:\n%s", want, out)
		}
	}
}

func onehot(dim, i int) []float64 {
	v := make([]float64, dim)
	v[i] = 1
	return v
}
