package config

import (
	"strings"
	"testing"
)

func TestLimitsParse(t *testing.T) {
	cfg, err := Parse([]byte("memory_limit_mib: 512\nlimits:\n  max_json_depth: 32\n  max_records_per_batch: 50\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{MemoryLimitMiB: 512, Intake: IntakeLimits{MaxJSONDepth: 32, MaxRecordsPerBatch: 50}}
	if cfg.Limits != want {
		t.Fatalf("limits = %+v, want %+v", cfg.Limits, want)
	}
	def := Default().Limits
	if def != (Limits{Intake: IntakeLimits{MaxJSONDepth: 64, MaxRecordsPerBatch: 1000}}) {
		t.Fatalf("defaults = %+v", def)
	}
}

func TestLimitsInvalid(t *testing.T) {
	_, err := Parse([]byte("memory_limit_mib: -1\nlimits:\n  max_json_depth: -2\n"))
	want := "line 1: `memory_limit_mib` must not be negative (0 follows GOMEMLIMIT)\n" +
		"line 3: `limits.max_json_depth` must not be negative (0 takes the default)"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	_, err = Parse([]byte("limits:\n  max_recs: 1\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: `limits.max_recs` is not a known key") {
		t.Fatalf("error = %v", err)
	}
}
