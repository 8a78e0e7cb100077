package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ragwatch/ragwatch/config"
)

func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "assembly:\n  wait: 50ms\n")
	bad := write("bad.yaml", "assembly:\n  wait: -1s\n  timeout: 1s\nlog:\n  level: loud\n")
	unknown := write("unknown.yaml", "assembly:\n  max_trace: 5\n")
	old := write("old.yaml", "drift:\n  detectors:\n    - {name: scores, signal: retrieval_score}\n")
	typo := write("typo.yaml", "slos:\n  - {name: cp, metric: citation_precison, alert_below: 0.7}\n")

	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string
	}{
		{"good", []string{"-c", good}, 0, "config OK\n"},
		{"every problem with line and key", []string{"-c", bad}, 1,
			bad + ": line 2: `assembly.wait` must not be negative\n" +
				bad + ": line 5: `log.level` must be debug, info, warn or error, got \"loud\"\n" +
				"2 problems found\n"},
		{"unknown key", []string{"--config", unknown}, 1,
			unknown + ": line 2: `assembly.max_trace` is not a known key; expected one of: complete_wait, max_bytes, max_traces, timeout, wait\n1 problem found\n"},
		{"deprecated name warns", []string{"-c", old}, 0,
			old + ": warning: `drift.detectors[0].signal`: \"retrieval_score\" is deprecated, use \"retrieval_score_top\"\nconfig OK\n"},
		{"alert that can never fire", []string{"-c", typo}, 1,
			typo + ": line 2: `slos[0].metric` \"citation_precison\" is not a metric the configured scorers or signals produce (did you mean citation_precision?)\n1 problem found\n"},
		{"no file", []string{}, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := validateCommand(context.Background(), c.args, &stdout, &stderr)
			if code != c.code || stdout.String() != c.stdout {
				t.Errorf("exit %d, stdout:\n%s\nwant exit %d, stdout:\n%s\nstderr: %s", code, stdout.String(), c.code, c.stdout, stderr.String())
			}
		})
	}
}

// The printed defaults are a valid config that loads back to the defaults.
func TestValidateDefaults(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := validateCommand(context.Background(), []string{"--defaults"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if _, err := config.Parse(stdout.Bytes()); err != nil {
		t.Fatalf("printed defaults do not load: %v\n%s", err, stdout.String())
	}
	if !bytes.Contains(stdout.Bytes(), []byte("receivers:\n  otlp:\n    grpc:\n      endpoint: 127.0.0.1:4317\n")) ||
		!bytes.Contains(stdout.Bytes(), []byte("assembly:\n  wait: 2s\n  complete_wait: 50ms\n")) {
		t.Errorf("defaults:\n%s", stdout.String())
	}
}
