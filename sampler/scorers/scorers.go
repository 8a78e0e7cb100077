// Package scorers builds the configured scorers (built-in, LLM judges, NLI, retrieval) from
// the `scoring` config section: the one constructor `ragwatch run`, `ragwatch worker` and
// `ragwatch eval` share.
package scorers

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers/bertscore"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm/anthropic"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm/openai"
	"github.com/ragwatch/ragwatch/sampler/scorers/nli"
	"github.com/ragwatch/ragwatch/sampler/scorers/retrieval"
)

// Option adjusts Build.
type Option func(*buildOptions)

type buildOptions struct {
	redact   func(string) string
	judges   []config.Judge
	judgeSet *JudgeSet
}

// WithRedact makes every LLM judge (prompts and embeddings inputs) and the NLI scorer
// (premises and hypotheses) filter what they send through redact: the process's redactor,
// so that custom patterns apply and redactions are counted. Without it they still redact
// with the built-in detectors (llm.JudgeOptions.Redact, nli.Config.Redact).
func WithRedact(redact func(string) string) Option {
	return func(o *buildOptions) { o.redact = redact }
}

// Build returns one scorer per backend that has enabled metrics, plus the retrieval scorer
// when retrieval metrics are on. Each metric goes to exactly one backend
// (config.ScoringEngine.MetricBackend). API keys are read here, through config.ReadSecret, so
// a missing key fails start-up with the variable or file named, never the value. reg may be
// nil (no metrics); it must not already hold the judge or NLI metrics, so call Build once per
// registry.
func Build(cfg config.Scoring, reg prometheus.Registerer, logger *slog.Logger, opts ...Option) ([]score.Scorer, error) {
	var bo buildOptions
	for _, o := range opts {
		o(&bo)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.ScoringEngine.Validate(); err != nil {
		return nil, fmt.Errorf("scoring config: %w", err)
	}
	groups := map[string][]string{}
	for _, m := range cfg.EnabledMetrics() {
		b := cfg.MetricBackend(m)
		groups[b] = append(groups[b], m)
	}
	judges, err := JudgeDefs(bo.judges, cfg)
	if err != nil {
		return nil, err
	}
	score.RegisterJudgeMetrics(judgeMetrics(bo.judges)...)
	bo.judgeSet.markScoring()
	var judgeMetrics *llm.Metrics
	judgeOpts := func(b config.LLMBackend) (llm.JudgeOptions, error) {
		if judgeMetrics == nil && reg != nil {
			m, err := llm.NewMetrics(reg)
			if err != nil {
				return llm.JudgeOptions{}, err
			}
			judgeMetrics = m
		}
		return llm.JudgeOptions{Timeout: b.Timeout, MaxRetries: b.MaxRetries, MaxConcurrency: b.MaxConcurrency,
			MaxTokens: b.MaxTokens, Metrics: judgeMetrics, Logger: logger, Redact: bo.redact,
			Pricing: llm.Pricing{InputPerMTok: b.InputCostPerMTok, OutputPerMTok: b.OutputCostPerMTok}}, nil
	}
	var out []score.Scorer
	for _, backend := range []string{config.BackendBuiltin, config.BackendOpenAI, config.BackendAnthropic, config.BackendNLI} {
		ms := groups[backend]
		if len(ms) == 0 && len(judges[backend]) == 0 {
			continue
		}
		var sc score.Scorer
		var err error
		switch backend {
		case config.BackendBuiltin:
			var keep []string
			for _, m := range ms {
				if slices.Contains(builtin.MetricNames, m) {
					keep = append(keep, m)
				}
			}
			sc = builtin.New(builtin.Options{Metrics: keep})
			if reg != nil {
				err = builtin.RegisterMetrics(reg)
			}
		case config.BackendOpenAI:
			sc, err = buildOpenAI(cfg.OpenAI, ms, judges[backend], judgeOpts)
		case config.BackendAnthropic:
			sc, err = buildAnthropic(cfg.Anthropic, ms, judges[backend], judgeOpts)
		case config.BackendNLI:
			sc, err = nli.New(nli.Config{URL: cfg.NLI.URL.Reveal(), Threshold: cfg.NLI.Threshold, Timeout: cfg.NLI.Timeout,
				MaxRetries: 2, Metrics: ms, Registerer: reg, Redact: bo.redact})
		}
		if err != nil {
			return nil, err
		}
		if ls, ok := sc.(*llm.Scorer); ok {
			bo.judgeSet.add(backend, ls)
		}
		for _, d := range judges[backend] {
			ms = append(ms, d.Metric)
		}
		logger.Info("scorer ready", "backend", backend, "metrics", strings.Join(ms, ","))
		out = append(out, sc)
	}
	if cfg.BERTScore.Enabled {
		bs, err := buildBERTScore(cfg.ScoringEngine, bo.redact)
		if err != nil {
			return nil, err
		}
		out = append(out, bs)
		logger.Info("scorer ready", "backend", "bertscore", "token_embeddings", cfg.BERTScore.URL.Reveal() != "")
	}
	if rs := Retrieval(cfg.ScoringEngine); rs != nil {
		out = append(out, rs)
		logger.Info("scorer ready", "backend", "retrieval", "k", fmt.Sprint(cfg.RetrievalK))
	}
	return out, nil
}

// Retrieval returns the retrieval scorer of cfg (its cut-offs, and only the retrieval metrics
// scoring.metrics names when it names any), or nil when retrieval metrics are off. The
// sampling stage runs it on every record with relevance labels; Build includes it for
// `ragwatch eval`.
func Retrieval(cfg config.ScoringEngine) *retrieval.Scorer {
	if !cfg.RetrievalEnabled() {
		return nil
	}
	keep := func(string) bool { return true }
	if len(cfg.Metrics) > 0 {
		// "ndcg@10" keeps that cut-off; "ndcg@k" keeps every configured one.
		keep = func(m string) bool {
			family, _, _ := strings.Cut(m, "@")
			return slices.Contains(cfg.Metrics, m) || slices.Contains(cfg.Metrics, family+"@k")
		}
	}
	return retrieval.New(cfg.RetrievalK, keep)
}

func buildOpenAI(b config.LLMBackend, metrics []string, judges []llm.JudgeDef, opts func(config.LLMBackend) (llm.JudgeOptions, error)) (score.Scorer, error) {
	key, err := config.ReadSecret(b.APIKeyEnv, b.APIKeyFile)
	if err != nil {
		return nil, fmt.Errorf("scoring.openai api key: %w", err)
	}
	o, err := opts(b)
	if err != nil {
		return nil, err
	}
	be := openai.New(openai.Config{BaseURL: b.BaseURL.Reveal(), Model: b.Model, APIKey: key,
		EmbeddingsModel: b.EmbeddingsModel, HTTPClient: judgeClient(b.MaxConcurrency)})
	return llm.NewScorer(llm.NewJudge(be, o), llm.ScorerOptions{Metrics: metrics, OnlyJudges: len(metrics) == 0, Judges: judges, Embedder: be.Embedder()})
}

// buildBERTScore scores BERTScore with the token embeddings of scoring.bertscore.url, or else
// the sentence embeddings of scoring.openai.embeddings_model.
func buildBERTScore(cfg config.ScoringEngine, redact func(string) string) (score.Scorer, error) {
	b := cfg.BERTScore
	o := bertscore.Options{Redact: redact, Baseline: bertscore.Baseline{Precision: b.Baseline.Precision, Recall: b.Baseline.Recall, F1: b.Baseline.F1}}
	if u := b.URL.Reveal(); u != "" {
		o.Tokens = bertscore.TEI{URL: u, Client: &http.Client{Timeout: b.Timeout}}
		if b.IDF {
			o.IDF = bertscore.NewIDF(b.MaxIDFTokens)
		}
	} else if cfg.OpenAI.EmbeddingsModel != "" {
		key, err := config.ReadSecret(cfg.OpenAI.APIKeyEnv, cfg.OpenAI.APIKeyFile)
		if err != nil {
			return nil, fmt.Errorf("scoring.openai api key: %w", err)
		}
		be := openai.New(openai.Config{BaseURL: cfg.OpenAI.BaseURL.Reveal(), Model: cfg.OpenAI.Model, APIKey: key,
			EmbeddingsModel: cfg.OpenAI.EmbeddingsModel, HTTPClient: &http.Client{Timeout: b.Timeout}})
		o.Sentences, o.Model = be.Embedder(), cfg.OpenAI.EmbeddingsModel
	}
	bs, err := bertscore.New(o)
	if err != nil {
		return nil, fmt.Errorf("scoring.bertscore: %w", err)
	}
	return bs, nil
}

func buildAnthropic(b config.LLMBackend, metrics []string, judges []llm.JudgeDef, opts func(config.LLMBackend) (llm.JudgeOptions, error)) (score.Scorer, error) {
	key, err := config.ReadSecret(b.APIKeyEnv, b.APIKeyFile)
	if err != nil {
		return nil, fmt.Errorf("scoring.anthropic api key: %w", err)
	}
	if key == "" {
		return nil, fmt.Errorf("scoring.anthropic needs api_key_env or api_key_file")
	}
	o, err := opts(b)
	if err != nil {
		return nil, err
	}
	be := anthropic.New(anthropic.Config{BaseURL: b.BaseURL.Reveal(), Model: b.Model, APIKey: key, HTTPClient: judgeClient(b.MaxConcurrency)})
	return llm.NewScorer(llm.NewJudge(be, o), llm.ScorerOptions{Metrics: metrics, OnlyJudges: len(metrics) == 0, Judges: judges})
}

// judgeClient is the HTTP client of one judge backend: its own transport keeping as many idle
// connections to the judge as the backend has calls in flight (max_concurrency). With the
// default of 2, the replies of a burst of calls (a judge answering its queue, or 503s after
// the same delay) close all but two connections, and the retries and next calls open new ones,
// each with its TLS handshake.
func judgeClient(maxConcurrency int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if maxConcurrency > t.MaxIdleConnsPerHost {
		t.MaxIdleConnsPerHost = maxConcurrency
	}
	return &http.Client{Transport: t}
}
