package rules

import (
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/config"
)

// TestVariantFilteredSLO: an SLO on one variant gets rules over its own counters (the engine
// counts only that variant's samples in them) and alerts labelled with the variant, like the
// engine's; the request metrics' variant label never reaches these expressions, so rules of
// SLOs without variant aggregate every variant as before.
func TestVariantFilteredSLO(t *testing.T) {
	c, err := config.Parse([]byte(`
slos:
  - {name: cp-canary, metric: citation_precision, alert_below: 0.7, variant: canary}
  - {name: cp, metric: citation_precision, alert_below: 0.7}
  - {name: faithful-canary, kind: burn_rate, metric: faithfulness, good_when: ">= 0.5", objective: 0.95, variant: canary}
drift:
  detectors:
    - {name: docs-canary, signal: retrieved_documents, variant: canary}
`))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	alertsSeen := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if strings.Contains(r.Expr, "variant") {
				t.Errorf("%s: expression matches on variant: %s", g.Name, r.Expr)
			}
			if r.Alert == "" {
				continue
			}
			alertsSeen++
			canary := strings.HasSuffix(g.Name, "-canary") || r.Labels["detector"] == "docs-canary"
			if got := r.Labels["variant"]; canary && got != "canary" || !canary && got != "" {
				t.Errorf("%s: alert %s variant label %q", g.Name, r.Alert, got)
			}
			if strings.HasPrefix(g.Name, "ragwatch-slo-") {
				slo := strings.TrimPrefix(g.Name, "ragwatch-slo-")
				if !strings.Contains(r.Expr, `slo="`+slo+`"`) {
					t.Errorf("%s: expression does not select its own counters: %s", g.Name, r.Expr)
				}
			}
		}
	}
	if alertsSeen < 4 {
		t.Fatalf("%d alerting rules", alertsSeen)
	}
}
