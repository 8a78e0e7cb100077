package config

import "testing"

func TestUpstreamSamplingProbability(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       float64
		err        string
	}{
		{"unset", "", 0, ""},
		{"a tenth", "receivers:\n  otlp:\n    upstream_sampling_probability: 0.1\n", 0.1, ""},
		{"one", "receivers:\n  otlp:\n    upstream_sampling_probability: 1\n", 1, ""},
		{"above one", "receivers:\n  otlp:\n    upstream_sampling_probability: 1.5\n", 0,
			"line 3: `receivers.otlp.upstream_sampling_probability` must be between 0 (not sampled upstream) and 1, got 1.5"},
		{"negative", "receivers:\n  otlp:\n    upstream_sampling_probability: -0.5\n", 0,
			"line 3: `receivers.otlp.upstream_sampling_probability` must be between 0 (not sampled upstream) and 1, got -0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Receivers.OTLP.UpstreamSamplingProbability; got != tc.want {
				t.Fatalf("upstream_sampling_probability = %v, want %v", got, tc.want)
			}
		})
	}
}
