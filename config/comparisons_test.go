package config

import (
	"testing"
)

func TestComparisons(t *testing.T) {
	c, err := Parse([]byte(`
comparisons:
  - {name: canary, metrics: [faithfulness], baseline: v1}
  - {name: latency, metrics: [latency_seconds], baseline: v1, candidate: v2, margin: 0.25, lower_is_better: true, severity: page}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Comparisons[0]
	if got.Margin != 0.02 || got.Alpha != 0.05 || got.MinSamples != 100 || got.Severity != "ticket" || got.Candidate != "" || got.LowerIsBetter {
		t.Errorf("defaults: %+v", got)
	}
	if l := c.Comparisons[1]; l.Margin != 0.25 || !l.LowerIsBetter || l.Candidate != "v2" || l.Severity != "page" {
		t.Errorf("%+v", l)
	}

	_, err = Parse([]byte(`
comparisons:
  - {name: a, metrics: [faithfulness], baseline: v1}
  - {name: b, metrics: [faithfulness], baseline: v1, candidate: v1, alpha: 0.7, margin: -1}
`))
	want := "line 4: `comparisons[1].candidate` must differ from the baseline \"v1\"\n" +
		"line 4: `comparisons[1].margin` must be a non-negative number, got -1\n" +
		"line 4: `comparisons[1].alpha` must be in (0, 0.5), got 0.7"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	_, err = Parse([]byte(`
comparisons:
  - {name: a, metrics: [faithfulness], baseline: v1, notifiers: [nope]}
  - {name: a, metrics: [faithfulness], baseline: v1}
`))
	want = "line 3: `comparisons[0].notifiers[0]` names no configured notifier: \"nope\"\n" +
		"line 4: `comparisons[1].name` \"a\" is used twice"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestVariantFilters(t *testing.T) {
	c, err := Parse([]byte(`
variants: {attributes: [app.variant], max_values: 3}
slos:
  - {name: canary-cp, metric: citation_precision, alert_below: 0.7, variant: prompt-v2}
drift:
  detectors:
    - {name: canary-docs, signal: retrieved_documents, variant: prompt-v2}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.SLOs[0].Variant != "prompt-v2" || c.Drift.Detectors[0].Variant != "prompt-v2" ||
		c.Variants.MaxValues != 3 || len(c.Variants.Attributes) != 1 || c.Variants.Attributes[0] != "app.variant" {
		t.Fatalf("%+v %+v %+v", c.SLOs[0], c.Drift.Detectors[0], c.Variants)
	}
}
