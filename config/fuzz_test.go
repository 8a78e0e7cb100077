package config

import (
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary YAML to the strict loader: it must never panic, and a config it
// accepts must pass its own validation again.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"receivers: {otlp: {grpc: {endpoint: \"127.0.0.1:4317\"}}}",
		"assembly: {wait: 2s, timeout: 60s, max_traces: 10}",
		"slos: [{name: a, metric: citation_precision, alert_below: 0.7, window: 15m}]",
		"sampling: {rate: 0.5, rules: [{name: neg, match: {negative_feedback: true}, probability: 1}]}",
		"notifiers: [{name: x, type: webhook, url: \"http://h/\"}]",
		"- 1\n- 2",
		"a: &a [*a]",
		"scoring: {workers: -1}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 1<<16 || strings.Count(text, "*") > 64 {
			t.Skip("alias expansion of huge documents is yaml.v3's own limit, not ours")
		}
		c, err := Parse([]byte(text))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if err := c.validate(nil); err != nil {
			t.Fatalf("an accepted config fails validation: %v", err)
		}
	})
}
