package scorers

import (
	"fmt"
	"log/slog"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm/anthropic"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm/openai"
)

// BuildPairJudge returns the pairwise judge named by backend (pairs.judge): builtin, or the
// LLM judge of scoring.openai or scoring.anthropic. The LLM judges get their own concurrency
// cap from the backend's max_concurrency and record no ragwatch_judge_* metrics (Build
// registers those once per registry); what they spend is counted by the worker
// (ragwatch_scoring_cost_usd_total, _tokens_total) and charged to the budget. WithRedact
// applies as in Build.
func BuildPairJudge(cfg config.Scoring, backend string, logger *slog.Logger, opts ...Option) (pairwise.Judge, error) {
	if backend == "" || backend == config.BackendBuiltin {
		return builtin.PairJudge{}, nil
	}
	j, err := BuildLLMJudge(cfg, backend, logger, opts...)
	if err != nil {
		return nil, fmt.Errorf("pairs.judge: %w", err)
	}
	return llm.NewPairJudge(j, 0, 0), nil
}

// BuildLLMJudge returns the structured-call client of an LLM backend of the scoring section
// (openai or anthropic): its key read through config.ReadSecret, its timeouts, retries,
// concurrency and prices, and WithRedact's redactor on every prompt.
func BuildLLMJudge(cfg config.Scoring, backend string, logger *slog.Logger, opts ...Option) (*llm.Judge, error) {
	var bo buildOptions
	for _, o := range opts {
		o(&bo)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	judgeOpts := func(b config.LLMBackend) llm.JudgeOptions {
		return llm.JudgeOptions{Timeout: b.Timeout, MaxRetries: b.MaxRetries, MaxConcurrency: b.MaxConcurrency,
			MaxTokens: b.MaxTokens, Logger: logger, Redact: bo.redact,
			Pricing: llm.Pricing{InputPerMTok: b.InputCostPerMTok, OutputPerMTok: b.OutputCostPerMTok}}
	}
	switch backend {
	case config.BackendOpenAI:
		b := cfg.OpenAI
		key, err := config.ReadSecret(b.APIKeyEnv, b.APIKeyFile)
		if err != nil {
			return nil, fmt.Errorf("scoring.openai api key: %w", err)
		}
		be := openai.New(openai.Config{BaseURL: b.BaseURL.Reveal(), Model: b.Model, APIKey: key, HTTPClient: judgeClient(b.MaxConcurrency)})
		return llm.NewJudge(be, judgeOpts(b)), nil
	case config.BackendAnthropic:
		b := cfg.Anthropic
		key, err := config.ReadSecret(b.APIKeyEnv, b.APIKeyFile)
		if err != nil {
			return nil, fmt.Errorf("scoring.anthropic api key: %w", err)
		}
		if key == "" {
			return nil, fmt.Errorf("scoring.anthropic needs api_key_env or api_key_file")
		}
		be := anthropic.New(anthropic.Config{BaseURL: b.BaseURL.Reveal(), Model: b.Model, APIKey: key, HTTPClient: judgeClient(b.MaxConcurrency)})
		return llm.NewJudge(be, judgeOpts(b)), nil
	}
	return nil, fmt.Errorf("unknown judge %q (builtin, openai, anthropic)", backend)
}
