package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"github.com/ragwatch/ragwatch/alerts/rules"
	"github.com/ragwatch/ragwatch/config"
)

// TestCommittedRulesAreCurrent fails when deploy/prometheus/ragwatch-rules.yml was not
// regenerated after the example config or the rule generator changed: run
// `go run ./cmd/ragwatch rules -c deploy/compose/ragwatch.yaml > deploy/prometheus/ragwatch-rules.yml`.
func TestCommittedRulesAreCurrent(t *testing.T) {
	cfg, err := config.Load("compose/ragwatch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := rules.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want, err := rules.Plain(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("prometheus/ragwatch-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("deploy/prometheus/ragwatch-rules.yml is stale: run `go run ./cmd/ragwatch rules -c deploy/compose/ragwatch.yaml > deploy/prometheus/ragwatch-rules.yml`")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (Debian package prometheus); the e2e suite checks generated rules with it")
	}
	if out, err := exec.Command(promtool, "check", "rules", "prometheus/ragwatch-rules.yml").CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

func TestAlertmanagerExampleIsValid(t *testing.T) {
	amtool, err := exec.LookPath("amtool")
	if err != nil {
		t.Skip("amtool not on PATH (Debian package prometheus-alertmanager)")
	}
	for _, f := range []string{"alertmanager/alertmanager.yml", "compose/alertmanager.yml"} {
		if out, err := exec.Command(amtool, "check-config", f).CombinedOutput(); err != nil {
			t.Errorf("amtool check-config %s: %v\n%s", f, err, out)
		}
	}
}
