package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A config that opens ragwatch's own subjects to the app fails `ragwatch validate`, with the key
// and line, before anything starts.
func TestValidateRefusesAppSubjectsOverRagwatch(t *testing.T) {
	for _, tt := range []struct{ subject, hit string }{
		{"ragwatch.>", "ragwatch.scores.> (`scoring.queue.scores_subject_prefix`)"},
		{">", "$KV.> (the JetStream KV buckets)"},
		{"ragwatch.scores.support-bot", "ragwatch.scores.> (`scoring.queue.scores_subject_prefix`)"},
		{"ragwatch.scoring.records", "ragwatch.scoring.records (`scoring.queue.subject`)"},
	} {
		t.Run(tt.subject, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ragwatch.yaml")
			body := "nats:\n  subjects:\n    records: \"" + tt.subject + "\"\n    otlp: \"\"\n    otlp_logs: \"\"\n    feedback: \"\"\n    labels: \"\"\n"
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := validateCommand(context.Background(), []string{"-c", p}, &stdout, &stderr)
			prefix := p + ": line 3: `nats.subjects.records` \"" + tt.subject + "\" overlaps subjects the app must not publish on: "
			if code != 1 || !strings.HasPrefix(stdout.String(), prefix) || !strings.Contains(stdout.String(), tt.hit) ||
				!strings.HasSuffix(stdout.String(), "\n1 problem found\n") {
				t.Fatalf("exit %d, stdout:\n%s\nwant exit 1 and %q ... %s", code, stdout.String(), prefix, tt.hit)
			}
		})
	}
}
