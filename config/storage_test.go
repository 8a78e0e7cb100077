package config

import (
	"strings"
	"testing"
)

func TestStorageCapsDefaults(t *testing.T) {
	c, err := Parse([]byte("nats:\n  consume: {mode: jetstream}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var sum int64
	for _, sc := range c.StorageCaps() {
		got[sc.Name] = sc.MaxBytes
		sum += sc.MaxBytes
	}
	want := map[string]int64{
		"RAGWATCH_SCORING":      30 << 20,
		"RAGWATCH_SCORING_DEAD": 32 << 20,
		"KV_ragwatch_feedback":  64 << 20,
		"KV_ragwatch_alerts":    8 << 20,
		"RAGWATCH_INGEST":       128 << 20,
		"KV_ragwatch_dedup":     16 << 20,
		"KV_ragwatch_labelcal":  16 << 20,
	}
	if len(got) != len(want) {
		t.Fatalf("caps = %v, want %v", got, want)
	}
	for name, b := range want {
		if got[name] != b {
			t.Errorf("%s cap = %d, want %d", name, got[name], b)
		}
	}
	if sum > c.NATS.Embedded.MaxStore {
		t.Fatalf("caps sum %d > nats.embedded.max_store %d", sum, c.NATS.Embedded.MaxStore)
	}
}

func TestCheckStorage(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"defaults fit", "", ""},
		{"external cluster is not checked", "nats: {url: nats://n:4222}\nscoring: {queue: {max_bytes: 1099511627776}}\n", ""},
		{"queue above the store", "scoring: {queue: {max_bytes: 1073741824}}\n",
			"`nats.embedded.max_store` is 469762048 bytes, less than the caps of the streams and buckets ragwatch creates"},
		{"store too small", "nats: {embedded: {max_store: 1048576}}\n", "`nats.embedded.max_store` is 1048576 bytes"},
		{"zero cap", "feedback: {max_bytes: 0}\n", "`feedback.max_bytes` must be positive"},
		{"zero store", "nats: {embedded: {max_store: 0}}\n", "`nats.embedded.max_store` must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
