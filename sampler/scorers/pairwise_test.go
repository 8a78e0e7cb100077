package scorers

import (
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
)

func TestBuildPairJudge(t *testing.T) {
	cfg := config.Default().Scoring
	j, err := BuildPairJudge(cfg, config.BackendBuiltin, nil)
	if err != nil || j.Name() != "builtin" {
		t.Fatalf("builtin: %v %v", j, err)
	}
	if _, ok := j.(builtin.PairJudge); !ok {
		t.Fatalf("builtin judge is %T", j)
	}
	t.Setenv("PAIR_TEST_KEY", "sk-test")
	cfg.OpenAI.APIKeyEnv = "PAIR_TEST_KEY"
	if j, err := BuildPairJudge(cfg, config.BackendOpenAI, nil); err != nil || j.Name() != "openai" {
		t.Fatalf("openai: %v %v", j, err)
	}
	cfg.Anthropic.APIKeyEnv = "PAIR_TEST_MISSING"
	if _, err := BuildPairJudge(cfg, config.BackendAnthropic, nil); err == nil || !strings.Contains(err.Error(), "PAIR_TEST_MISSING is not set") {
		t.Fatalf("anthropic without key: %v", err)
	}
	cfg.Anthropic.APIKeyEnv = "PAIR_TEST_KEY"
	if j, err := BuildPairJudge(cfg, config.BackendAnthropic, nil); err != nil || j.Name() != "anthropic" {
		t.Fatalf("anthropic: %v %v", j, err)
	}
	if _, err := BuildPairJudge(cfg, "nli", nil); err == nil || !strings.Contains(err.Error(), `unknown judge "nli"`) {
		t.Fatalf("nli: %v", err)
	}
}
