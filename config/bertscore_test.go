package config

import (
	"strings"
	"testing"
)

func TestBERTScoreConfig(t *testing.T) {
	c, err := Parse([]byte("scoring:\n  bertscore: {enabled: true, url: \"http://127.0.0.1:8080\", idf: true, baseline: {f1: 0.83}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Scoring.BERTScore; !b.Enabled || !b.IDF || b.Baseline.F1 != 0.83 || b.MaxIDFTokens != 1<<18 || b.Timeout <= 0 {
		t.Fatalf("bertscore %+v", b)
	}
	_, err = Parse([]byte("scoring:\n  bertscore:\n    enabled: true\n    baseline: {recall: 1}\n    max_idf_tokens: 0\n"))
	if err == nil {
		t.Fatal("invalid bertscore settings accepted")
	}
	for _, w := range []string{
		"line 3: `scoring.bertscore.enabled` needs bertscore.url (a text-embeddings-inference server) or openai.embeddings_model",
		"`scoring.bertscore.baseline.recall` must be in [0, 1), got 1",
		"line 5: `scoring.bertscore.max_idf_tokens` must be positive, got 0",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if _, err := Parse([]byte("scoring:\n  openai: {embeddings_model: e}\n  bertscore: {enabled: true}\n")); err != nil {
		t.Errorf("sentence embeddings mode: %v", err)
	}
}
