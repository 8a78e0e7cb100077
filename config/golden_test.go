package config

import (
	"strings"
	"testing"
	"time"
)

func TestGoldenConfig(t *testing.T) {
	c, err := Parse([]byte("golden:\n  file: g.jsonl\n  interval: 6h\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := defaultGolden()
	want.File, want.Interval = "g.jsonl", 6*time.Hour
	if c.Golden != want {
		t.Fatalf("golden %+v, want %+v", c.Golden, want)
	}
	if caps := c.StorageCaps(); caps[len(caps)-1] != (StorageCap{"KV_ragwatch_golden", "golden.max_bytes", 4 << 20}) {
		t.Fatalf("storage caps %+v lack the golden bucket", caps)
	}
	_, err = Parse([]byte("golden:\n  file: g.jsonl\n  interval: 30s\n  tolerance: 1.5\n  max_changed: -0.1\n  bucket: \"\"\n  max_items: 0\n"))
	if err == nil {
		t.Fatal("invalid golden settings accepted")
	}
	for _, w := range []string{
		"line 3: `golden.interval` must be at least 1m, got 30s",
		"line 4: `golden.tolerance` must be between 0 and 1, got 1.5",
		"line 5: `golden.max_changed` must be between 0 and 1, got -0.1",
		"line 6: `golden.bucket` must not be empty",
		"line 7: `golden.max_items` must be positive, got 0",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}
