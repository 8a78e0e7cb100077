package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestScoringDefaults(t *testing.T) {
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := ScoringEngine{
		Backend:    "builtin",
		OpenAI:     LLMBackend{Timeout: 60 * time.Second, MaxConcurrency: 4, MaxRetries: 3, MaxTokens: 1024},
		Anthropic:  LLMBackend{Timeout: 60 * time.Second, MaxConcurrency: 4, MaxRetries: 3, MaxTokens: 1024},
		NLI:        NLI{Threshold: 0.7, Timeout: 10 * time.Second},
		RetrievalK: []int{1, 3, 5, 10},
		Recent:     RecentScores{Size: 1000},
		BERTScore:  BERTScore{Timeout: 30 * time.Second, MaxIDFTokens: 1 << 18},
		Builtin: BuiltinScorer{Calibration: LabelCalibration{Enabled: true, MinLabels: 200, Folds: 5, MaxPairs: 2000,
			MaxSeries: 256, Bucket: "ragwatch_labelcal", History: 8, MaxBytes: 16 << 20}},
	}
	if !reflect.DeepEqual(c.Scoring.ScoringEngine, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c.Scoring.ScoringEngine, want)
	}
	wantMetrics := []string{"faithfulness", "answer_relevancy", "context_precision", "context_recall",
		"citation_precision", "citation_recall", "answer_similarity"}
	if got := c.Scoring.EnabledMetrics(); !reflect.DeepEqual(got, wantMetrics) {
		t.Fatalf("enabled metrics = %v, want %v", got, wantMetrics)
	}
	if !c.Scoring.RetrievalEnabled() {
		t.Fatal("retrieval metrics should be on by default")
	}
}

func TestScoringFull(t *testing.T) {
	c, err := Parse([]byte(`
scoring:
  backend: openai
  openai:
    base_url: http://127.0.0.1:8000/v1
    model: gpt-4o-mini
    api_key_env: OPENAI_API_KEY
    embeddings_model: text-embedding-3-small
    timeout: 20s
    max_concurrency: 2
    input_cost_per_mtok: 0.15
    output_cost_per_mtok: 0.6
  anthropic:
    model: claude-sonnet-4-5
    api_key_file: /run/secrets/anthropic
  nli:
    backend: http
    url: http://nli:8080
    threshold: 0.8
  metrics: [faithfulness, rubric_accuracy, answer_relevancy, ndcg@k, mrr]
  retrieval_k: [3, 10]
  overrides:
    rubric_accuracy: anthropic
`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Scoring.ScoringEngine
	if s.OpenAI.Model != "gpt-4o-mini" || s.OpenAI.Timeout != 20*time.Second || s.OpenAI.MaxConcurrency != 2 ||
		s.OpenAI.MaxRetries != 3 || s.OpenAI.EmbeddingsModel != "text-embedding-3-small" || s.OpenAI.InputCostPerMTok != 0.15 {
		t.Fatalf("openai = %+v", s.OpenAI)
	}
	got := map[string]string{}
	for _, m := range s.EnabledMetrics() {
		got[m] = s.MetricBackend(m)
	}
	want := map[string]string{"faithfulness": "nli", "rubric_accuracy": "anthropic", "answer_relevancy": "openai"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("metric backends = %v, want %v", got, want)
	}
	if !s.RetrievalEnabled() || s.MetricBackend("ndcg@3") != "" {
		t.Fatal("retrieval metrics should be enabled and backend-free")
	}
}

func TestScoringValidate(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"bad backend", "scoring:\n  backend: gemini\n",
			"line 2: `scoring.backend` must be builtin, openai or anthropic, got \"gemini\""},
		{"openai without model", "scoring:\n  backend: openai\n",
			"line 1: `scoring.openai.model` is required"},
		{"unknown metric", "scoring:\n  metrics: [faithfulnes]\n",
			"line 2: `scoring.metrics[0]` unknown metric \"faithfulnes\"; expected one of: faithfulness, answer_relevancy, context_precision, context_recall, citation_precision, citation_recall, answer_similarity, rubric_relevance, rubric_completeness, rubric_accuracy, rubric_citation_quality, precision@k, recall@k, mrr, ndcg@k, hit@k"},
		{"k not configured", "scoring:\n  metrics: [ndcg@7]\n",
			"line 2: `scoring.metrics[0]` ndcg@7 needs 7 in retrieval_k"},
		{"rubric on builtin", "scoring:\n  metrics: [rubric_accuracy]\n",
			"line 2: `scoring.metrics` rubric_accuracy is scored by backend builtin, which cannot score it; set overrides.rubric_accuracy"},
		{"override bad backend", "scoring:\n  overrides:\n    faithfulness: gemini\n",
			"line 3: `scoring.overrides.faithfulness` must be builtin, openai, anthropic or nli, got \"gemini\""},
		{"override nli rubric", "scoring:\n  overrides:\n    rubric_accuracy: nli\n",
			"line 3: `scoring.overrides.rubric_accuracy` backend nli cannot score rubric_accuracy"},
		{"nli http without url", "scoring:\n  nli:\n    backend: http\n",
			"line 2: `scoring.nli.url` must be set (needed by the http NLI backend)"},
		{"nli threshold", "scoring:\n  nli:\n    threshold: 1.5\n",
			"line 3: `scoring.nli.threshold` must be in (0, 1], got 1.5"},
		{"judge needs llm", "scoring:\n  nli:\n    backend: judge\n",
			"line 3: `scoring.nli.backend` judge needs scoring.backend openai or anthropic"},
		{"both key sources", "scoring:\n  backend: anthropic\n  anthropic:\n    model: m\n    api_key_env: A\n    api_key_file: /x\n",
			"line 5: `scoring.anthropic.api_key_env` set either api_key_env or api_key_file, not both"},
		{"anthropic embeddings", "scoring:\n  backend: anthropic\n  anthropic:\n    model: m\n    embeddings_model: e\n",
			"line 5: `scoring.anthropic.embeddings_model` is only supported by the openai backend"},
		{"bad base url", "scoring:\n  backend: openai\n  openai:\n    model: m\n    base_url: localhost:8000\n",
			"line 5: `scoring.openai.base_url` must be an http:// or https:// URL, got \"localhost:8000\""},
		{"bad k", "scoring:\n  retrieval_k: [3, 0]\n",
			"line 2: `scoring.retrieval_k[1]` must be positive, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tt.want {
				t.Fatalf("error:\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestScoringSecretsNotInConfig(t *testing.T) {
	c, err := Parse([]byte("scoring:\n  backend: openai\n  openai:\n    model: m\n    api_key_env: MY_KEY\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(c.Scoring)
	if !strings.Contains(string(b), `"APIKeyEnv":"MY_KEY"`) {
		t.Fatalf("config names the variable, never holds the key: %s", b)
	}
}
