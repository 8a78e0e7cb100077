package config

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/internal/score"
)

// Scoring configures the scoring queue and workers (ScoringRuntime, sampling.go) and the
// scorers and their backends (ScoringEngine, this file). Both sit under the one `scoring` key.
type Scoring struct {
	ScoringRuntime `yaml:",inline"`
	ScoringEngine  `yaml:",inline"`
}

// Validate implements Validator. The inlined parts validate themselves; without this method
// Scoring would promote ScoringEngine.Validate and the walk would report each problem twice.
func (Scoring) Validate() error { return nil }

func defaultScoring() Scoring {
	return Scoring{ScoringRuntime: defaultScoringRuntime(), ScoringEngine: defaultScoringEngine()}
}

// Scoring backends and metric names. The lists are the single source for validation, the
// scorer builder and the docs.
const (
	BackendBuiltin   = "builtin"
	BackendOpenAI    = "openai"
	BackendAnthropic = "anthropic"
	BackendNLI       = "nli" // only as a per-metric override or through nli.backend: http

	NLIBuiltin = "builtin" // the built-in scorer verifies claims
	NLIJudge   = "judge"   // the LLM judge (scoring.backend) verifies claims
	NLIHTTP    = "http"    // an HTTP NLI model server verifies claims
)

// LLMMetrics are the metrics an LLM judge backend can score.
var LLMMetrics = []string{
	score.Faithfulness, score.AnswerRelevancy, score.ContextPrecision, score.ContextRecall,
	score.CitationPrecision, score.CitationRecall, score.AnswerSimilarity,
	score.RubricRelevance, score.RubricCompleteness, score.RubricAccuracy, score.RubricCitationQuality,
}

// BuiltinMetrics are the metrics the built-in (no network) scorer covers.
var BuiltinMetrics = []string{
	score.Faithfulness, score.AnswerRelevancy, score.ContextPrecision, score.ContextRecall,
	score.CitationPrecision, score.CitationRecall, score.AnswerSimilarity,
}

// NLIMetrics are the claim-verification metrics an NLI model server can score.
var NLIMetrics = []string{score.Faithfulness, score.CitationPrecision, score.CitationRecall}

// RetrievalMetrics are computed for every record with relevance labels, per configured k
// (`mrr` has no k).
var RetrievalMetrics = []string{score.PrecisionAt + "k", score.RecallAt + "k", score.MRR, score.NDCGAt + "k", score.HitAt + "k"}

// ScoringEngine chooses the scorers and their backends.
type ScoringEngine struct {
	// Backend scores every enabled metric unless Overrides or NLI say otherwise.
	Backend   string     `yaml:"backend"` // builtin | openai | anthropic
	OpenAI    LLMBackend `yaml:"openai"`
	Anthropic LLMBackend `yaml:"anthropic"`
	NLI       NLI        `yaml:"nli"`
	// Metrics is the enabled set; empty enables every metric the chosen backends can score.
	Metrics []string `yaml:"metrics"`
	// RetrievalK are the cut-offs of the retrieval metrics; empty disables retrieval metrics.
	RetrievalK []int `yaml:"retrieval_k"`
	// Overrides maps a metric to the backend that scores it (builtin, openai, anthropic, nli).
	Overrides map[string]string `yaml:"overrides"`
	// Recent is the in-memory ring behind GET /api/v1/scores.
	Recent RecentScores `yaml:"recent"`
	// BERTScore adds bertscore_precision, _recall and _f1 (bertscore.go).
	BERTScore BERTScore `yaml:"bertscore"`
	// Builtin configures the builtin scorer: its calibration from each team's labels.
	Builtin BuiltinScorer `yaml:"builtin"`
}

// LLMBackend configures one LLM judge backend (OpenAI-compatible or Anthropic).
type LLMBackend struct {
	BaseURL    SecretURL `yaml:"base_url"` // "" uses the vendor's public API
	Model      string    `yaml:"model"`
	APIKeyEnv  string    `yaml:"api_key_env"`
	APIKeyFile string    `yaml:"api_key_file"`
	// EmbeddingsModel enables embeddings (OpenAI-compatible only) for answer_relevancy and
	// answer_similarity.
	EmbeddingsModel string        `yaml:"embeddings_model"`
	Timeout         time.Duration `yaml:"timeout"`
	MaxConcurrency  int           `yaml:"max_concurrency"`
	MaxRetries      int           `yaml:"max_retries"`
	MaxTokens       int           `yaml:"max_tokens"`
	// Prices in US dollars per million tokens, for cost reporting; 0 reports no cost.
	InputCostPerMTok  float64 `yaml:"input_cost_per_mtok"`
	OutputCostPerMTok float64 `yaml:"output_cost_per_mtok"`
}

// NLI configures how claims are verified for faithfulness and the citation metrics.
type NLI struct {
	// Backend is builtin, judge or http; "" follows scoring.backend (judge for an LLM backend).
	Backend   string        `yaml:"backend"`
	URL       SecretURL     `yaml:"url"` // the model server's base URL; /predict is appended
	Threshold float64       `yaml:"threshold"`
	Timeout   time.Duration `yaml:"timeout"`
}

// RecentScores configures the ring of recent scores served at /api/v1/scores.
type RecentScores struct {
	Size int `yaml:"size"`
	// IncludeContent adds the record's query and answer to API responses; off by default.
	IncludeContent bool `yaml:"include_content"`
}

func defaultLLMBackend() LLMBackend {
	return LLMBackend{Timeout: 60 * time.Second, MaxConcurrency: 4, MaxRetries: 3, MaxTokens: 1024}
}

func defaultScoringEngine() ScoringEngine {
	return ScoringEngine{
		Backend:    BackendBuiltin,
		OpenAI:     defaultLLMBackend(),
		Anthropic:  defaultLLMBackend(),
		NLI:        NLI{Threshold: 0.7, Timeout: 10 * time.Second},
		BERTScore:  defaultBERTScore(),
		Builtin:    BuiltinScorer{Calibration: defaultLabelCalibration()},
		RetrievalK: []int{1, 3, 5, 10},
		Recent:     RecentScores{Size: 1000},
	}
}

// IsRetrievalMetric reports whether name is a retrieval metric name such as "ndcg@10" or "mrr".
func IsRetrievalMetric(name string) bool {
	if name == score.MRR {
		return true
	}
	base, k, ok := strings.Cut(name, "@")
	if !ok || k == "" {
		return false
	}
	for _, c := range k {
		if c < '0' || c > '9' {
			return false
		}
	}
	return slices.Contains(RetrievalMetrics, base+"@k")
}

func knownMetric(name string) bool {
	return slices.Contains(LLMMetrics, name) || IsRetrievalMetric(name) || slices.Contains(RetrievalMetrics, name)
}

// MetricBackend returns the backend that scores metric m: the override, else nli.backend for
// the claim-verification metrics, else scoring.backend. Retrieval metrics return "".
func (s ScoringEngine) MetricBackend(m string) string {
	if IsRetrievalMetric(m) || slices.Contains(RetrievalMetrics, m) {
		return ""
	}
	if b, ok := s.Overrides[m]; ok {
		return b
	}
	if slices.Contains(NLIMetrics, m) {
		switch s.NLI.Backend {
		case NLIHTTP:
			return BackendNLI
		case NLIBuiltin:
			return BackendBuiltin
		}
	}
	return s.Backend
}

// SupportedMetrics lists the metrics a backend can score.
func SupportedMetrics(backend string) []string {
	switch backend {
	case BackendBuiltin:
		return BuiltinMetrics
	case BackendOpenAI, BackendAnthropic:
		return LLMMetrics
	case BackendNLI:
		return NLIMetrics
	}
	return nil
}

// EnabledMetrics returns the non-retrieval metrics to score: the configured list, or every
// metric its backend supports when the list is empty.
func (s ScoringEngine) EnabledMetrics() []string {
	var out []string
	if len(s.Metrics) > 0 {
		for _, m := range s.Metrics {
			if !IsRetrievalMetric(m) && !slices.Contains(RetrievalMetrics, m) && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
		return out
	}
	for _, m := range LLMMetrics {
		if slices.Contains(SupportedMetrics(s.MetricBackend(m)), m) {
			out = append(out, m)
		}
	}
	return out
}

// RetrievalEnabled reports whether retrieval metrics are computed: k values are set and the
// metrics list is empty or names at least one retrieval metric.
func (s ScoringEngine) RetrievalEnabled() bool {
	if len(s.RetrievalK) == 0 {
		return false
	}
	if len(s.Metrics) == 0 {
		return true
	}
	return slices.ContainsFunc(s.Metrics, func(m string) bool {
		return IsRetrievalMetric(m) || slices.Contains(RetrievalMetrics, m)
	})
}

// Validate implements Validator.
func (s ScoringEngine) Validate() error {
	var errs []error
	backends := []string{BackendBuiltin, BackendOpenAI, BackendAnthropic}
	if !slices.Contains(backends, s.Backend) {
		errs = append(errs, Invalid("backend", "must be builtin, openai or anthropic, got %q", s.Backend))
	}
	if s.BERTScore.Enabled && s.BERTScore.URL.Reveal() == "" && s.OpenAI.EmbeddingsModel == "" {
		errs = append(errs, Invalid("bertscore.enabled", "needs bertscore.url (a text-embeddings-inference server) or openai.embeddings_model"))
	}
	used := map[string]bool{}
	for i, m := range s.Metrics {
		if !knownMetric(m) {
			errs = append(errs, Invalid(fmt.Sprintf("metrics[%d]", i), "unknown metric %q; expected one of: %s, %s",
				m, strings.Join(LLMMetrics, ", "), strings.Join(RetrievalMetrics, ", ")))
			continue
		}
		if _, k, ok := strings.Cut(m, "@"); ok && k != "k" {
			if n, err := strconv.Atoi(k); err != nil || !slices.Contains(s.RetrievalK, n) {
				errs = append(errs, Invalid(fmt.Sprintf("metrics[%d]", i), "%s needs %s in retrieval_k", m, k))
			}
		}
	}
	for m, b := range s.Overrides {
		if !slices.Contains(LLMMetrics, m) {
			errs = append(errs, Invalid("overrides."+m, "is not a metric that a backend scores; expected one of: %s", strings.Join(LLMMetrics, ", ")))
			continue
		}
		if !slices.Contains(append(backends, BackendNLI), b) {
			errs = append(errs, Invalid("overrides."+m, "must be builtin, openai, anthropic or nli, got %q", b))
			continue
		}
		if !slices.Contains(SupportedMetrics(b), m) {
			errs = append(errs, Invalid("overrides."+m, "backend %s cannot score %s", b, m))
		}
	}
	switch s.NLI.Backend {
	case "", NLIBuiltin, NLIHTTP:
	case NLIJudge:
		if s.Backend == BackendBuiltin {
			errs = append(errs, Invalid("nli.backend", "judge needs scoring.backend openai or anthropic"))
		}
	default:
		errs = append(errs, Invalid("nli.backend", "must be builtin, judge or http, got %q", s.NLI.Backend))
	}
	if !(s.NLI.Threshold > 0 && s.NLI.Threshold <= 1) {
		errs = append(errs, Invalid("nli.threshold", "must be in (0, 1], got %v", s.NLI.Threshold))
	}
	if s.NLI.Timeout <= 0 {
		errs = append(errs, Invalid("nli.timeout", "must be positive"))
	}
	for _, m := range s.EnabledMetrics() {
		b := s.MetricBackend(m)
		used[b] = true
		if !slices.Contains(SupportedMetrics(b), m) && knownMetric(m) {
			errs = append(errs, Invalid("metrics", "%s is scored by backend %s, which cannot score it; set overrides.%s", m, b, m))
		}
	}
	if used[BackendNLI] || s.NLI.Backend == NLIHTTP {
		if err := checkURL(s.NLI.URL.Reveal()); err != nil {
			errs = append(errs, Invalid("nli.url", "%v (needed by the http NLI backend)", err))
		}
	}
	if used[BackendOpenAI] || s.Backend == BackendOpenAI {
		errs = append(errs, prefixErrs("openai", s.OpenAI.validate(true))...)
	}
	if used[BackendAnthropic] || s.Backend == BackendAnthropic {
		errs = append(errs, prefixErrs("anthropic", s.Anthropic.validate(false))...)
	}
	for i, k := range s.RetrievalK {
		if k <= 0 {
			errs = append(errs, Invalid(fmt.Sprintf("retrieval_k[%d]", i), "must be positive, got %d", k))
		}
	}
	if s.Recent.Size <= 0 {
		errs = append(errs, Invalid("recent.size", "must be positive"))
	}
	return joinErrs(errs)
}

func (b LLMBackend) validate(embeddings bool) []error {
	var errs []error
	if b.Model == "" {
		errs = append(errs, Invalid("model", "is required"))
	}
	if b.BaseURL != "" {
		if err := checkURL(b.BaseURL.Reveal()); err != nil {
			errs = append(errs, Invalid("base_url", "%v", err))
		}
	}
	if b.APIKeyEnv != "" && b.APIKeyFile != "" {
		errs = append(errs, Invalid("api_key_env", "set either api_key_env or api_key_file, not both"))
	}
	if b.EmbeddingsModel != "" && !embeddings {
		errs = append(errs, Invalid("embeddings_model", "is only supported by the openai backend"))
	}
	if b.Timeout <= 0 {
		errs = append(errs, Invalid("timeout", "must be positive"))
	}
	if b.MaxConcurrency <= 0 {
		errs = append(errs, Invalid("max_concurrency", "must be positive"))
	}
	if b.MaxRetries < 0 {
		errs = append(errs, Invalid("max_retries", "must not be negative"))
	}
	if b.MaxTokens <= 0 {
		errs = append(errs, Invalid("max_tokens", "must be positive"))
	}
	if b.InputCostPerMTok < 0 || b.OutputCostPerMTok < 0 {
		errs = append(errs, Invalid("input_cost_per_mtok", "prices must not be negative"))
	}
	return errs
}

func prefixErrs(prefix string, errs []error) []error {
	for i, e := range errs {
		if fe, ok := e.(*FieldError); ok {
			errs[i] = &FieldError{Key: prefix + "." + fe.Key, Line: fe.Line, Msg: fe.Msg}
		}
	}
	return errs
}

func checkURL(s string) error {
	if s == "" {
		return fmt.Errorf("must be set")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an http:// or https:// URL, got %q", SecretURL(s).String())
	}
	return nil
}
