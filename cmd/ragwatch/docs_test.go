package main

import (
	"os"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/config"
)

// TestConfigDocsLoad keeps the YAML examples of docs/configuration.md and the README loadable:
// a renamed or removed key fails here instead of in a user's hands.
func TestConfigDocsLoad(t *testing.T) {
	for _, path := range []string{"../../docs/configuration.md", "../../README.md", "../../docs/variants.md",
		"../../docs/evaluations-otlp.md", "../../docs/evaluations-langfuse.md", "../../docs/evaluations-phoenix.md"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(data), "```yaml\n")
		if len(blocks) < 2 {
			t.Errorf("%s: no YAML examples", path)
		}
		for i, b := range blocks[1:] {
			body, _, ok := strings.Cut(b, "\n```")
			if !ok {
				t.Errorf("%s: YAML block %d is not closed", path, i+1)
				continue
			}
			if _, err := config.Parse([]byte(body)); err != nil {
				t.Errorf("%s: YAML block %d does not load:\n%v\n%s", path, i+1, err, body)
			}
		}
	}
}
