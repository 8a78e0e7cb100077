package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestMetricNamesMustBeProducible(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"typo in an SLO", "slos:\n  - {name: a, metric: citation_precison, alert_below: 0.7}\n",
			"line 2: `slos[0].metric` \"citation_precison\" is not a metric the configured scorers or signals produce (did you mean citation_precision?)"},
		{"typo in a drift signal", "drift:\n  detectors:\n    - {name: d, signal: retrievd_documents}\n",
			"line 3: `drift.detectors[0].signal` \"retrievd_documents\" is not a metric the configured scorers or signals produce (did you mean retrieved_documents?)"},
		{"typo in a comparison", "comparisons:\n  - {name: c, baseline: a, candidate: b, metrics: [faithfulnes]}\n",
			"line 2: `comparisons[0].metrics[0]` \"faithfulnes\" is not a metric the configured scorers or signals produce (did you mean faithfulness?)"},
		{"nothing close", "slos:\n  - {name: a, metric: banana, alert_below: 0.7}\n",
			"line 2: `slos[0].metric` \"banana\" is not a metric the configured scorers or signals produce"},
		{"retrieval k not configured", "slos:\n  - {name: a, metric: ndcg@20, alert_below: 0.7}\n",
			"line 2: `slos[0].metric` \"ndcg@20\" is not computed by the configured scoring (backend builtin, metrics [], retrieval_k [1 3 5 10])"},
		{"metric turned off", "scoring: {metrics: [faithfulness]}\nslos:\n  - {name: a, metric: citation_precision, alert_below: 0.7}\n",
			"line 3: `slos[0].metric` \"citation_precision\" is not computed by the configured scoring (backend builtin, metrics [faithfulness], retrieval_k [1 3 5 10])"},
		{"rubric without a judge", "slos:\n  - {name: a, metric: rubric_accuracy, alert_below: 0.7}\n",
			"line 2: `slos[0].metric` \"rubric_accuracy\" is not computed by the configured scoring (backend builtin, metrics [], retrieval_k [1 3 5 10])"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error:\n%v\nwant it to contain\n%s", err, c.want)
			}
		})
	}
	for _, ok := range []string{
		"slos:\n  - {name: a, metric: ndcg@5, alert_below: 0.7}\n",
		"slos:\n  - {name: a, metric: retrieval_score_mean, alert_below: 0.7}\n",
		"drift:\n  detectors:\n    - {name: d, signal: retrieval_score}\n",
		// A losing canary's pairwise win rate, and a judge's agreement with people, can page.
		"slos:\n  - {name: a, metric: pairwise_win_rate, variant: canary, alert_below: 0.45}\n",
		"slos:\n  - {name: a, metric: agreement_spearman_faithfulness, alert_below: 0.5}\n",
	} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestDeprecatedRetrievalScore(t *testing.T) {
	c, err := Parse([]byte("slos:\n  - {name: a, metric: retrieval_score, alert_below: 0.5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"`slos[0].metric`: \"retrieval_score\" is deprecated, use \"retrieval_score_top\""}
	if got := Deprecations(c); !reflect.DeepEqual(got, want) {
		t.Fatalf("deprecations = %q, want %q", got, want)
	}
	if got := Deprecations(Default()); len(got) != 0 {
		t.Fatalf("defaults use deprecated names: %q", got)
	}
}

func TestDefaultSLOsFollowTheScoring(t *testing.T) {
	// A file that turns metrics off without writing `slos:` keeps only the default SLOs that
	// can still fire.
	c, err := Parse([]byte("scoring: {metrics: [faithfulness]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range c.SLOs {
		names = append(names, s.Name)
	}
	want := []string{"faithfulness", "empty-retrieval-rate", "negative-feedback-rate"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("SLOs = %v, want %v", names, want)
	}
	// Every default SLO and detector names a metric the default scoring produces.
	if err := CheckMetricNames(Default()); err != nil {
		t.Fatal(err)
	}
}

func TestListenerAddresses(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:99999":              `must be host:port with a port in 0-65535, got "127.0.0.1:99999"`,
		"127.0.0.1:-1":                 `must be host:port with a port in 0-65535, got "127.0.0.1:-1"`,
		"localhost:http":               `must be host:port with a port in 0-65535, got "localhost:http"`,
		"bad_host!:9464":               `must be host:port with an IP address or host name, got host "bad_host!"`,
		"-lead.example:80":             `must be host:port with an IP address or host name, got host "-lead.example"`,
		"127.0.0.1":                    `must be host:port, got "127.0.0.1"`,
		"0.0.0.0:0":                    "",
		":9464":                        "",
		"[::1]:65535":                  "",
		"ragwatch.monitoring.svc:9464": "",
	} {
		_, err := Parse([]byte("http: {endpoint: \"" + addr + "\"}\n"))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", addr, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), "line 1: `http.endpoint` "+want)):
			t.Errorf("%s: error %v, want %s", addr, err, want)
		}
	}
}

func TestSLODecision(t *testing.T) {
	c, err := Parse([]byte("slos:\n  - {name: a, metric: faithfulness, alert_below: 0.7, decision: mean}\n  - {name: b, metric: faithfulness, alert_below: 0.7}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.SLOs[0].Decision != DecisionMean || c.SLOs[1].Decision != "" {
		t.Fatalf("decisions %q %q", c.SLOs[0].Decision, c.SLOs[1].Decision)
	}
	_, err = Parse([]byte("slos:\n  - {name: a, metric: faithfulness, alert_below: 0.7, decision: median}\n"))
	if err == nil || err.Error() != "line 2: `slos[0].decision` must be confidence or mean, got \"median\"" {
		t.Fatalf("error %v", err)
	}
}

func TestJudgeAndAgreementMetricsAreProducible(t *testing.T) {
	c := Default()
	c.Judges = []Judge{{Name: "tone"}}
	known := ProducibleMetrics(c)
	for _, m := range []string{"judge_tone", "agreement_spearman_faithfulness", "agreement_kappa_judge_tone", "refusal_correct"} {
		if !slices.Contains(known, m) {
			t.Errorf("%s is not producible", m)
		}
	}
	if slices.Contains(known, "judge_style") || slices.Contains(known, "agreement_mae_judge_style") {
		t.Error("a judge that is not configured is producible")
	}
}
