package natsconn

import (
	"errors"
	"testing"

	"github.com/ragwatch/ragwatch/internal/fielderr"
)

// Config reports its problems as fielderr.Errors with keys relative to `nats:`, which the
// config walk prefixes and gives their line (config's tests check the full messages).
func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c := DefaultConfig()
	c.StoreDir = " "
	c.Consume.Mode = ModeJetStream
	c.Consume.Stream = "bad name"
	c.Subjects.Labels = c.Subjects.Feedback
	var keys []string
	for _, e := range c.Validate().(interface{ Unwrap() []error }).Unwrap() {
		var fe *fielderr.Error
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a fielderr.Error", e)
		}
		keys = append(keys, fe.Key+": "+fe.Msg)
	}
	want := []string{
		"store_dir: must not be empty when the embedded server is used (no `url`)",
		"subjects.labels: must differ from `subjects.feedback`",
		`consume.stream: must be a stream name of letters, digits, '-' or '_', got "bad name"`,
	}
	if len(keys) != len(want) {
		t.Fatalf("problems = %q\nwant %q", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Errorf("problem %d = %q, want %q", i, keys[i], want[i])
		}
	}
}
