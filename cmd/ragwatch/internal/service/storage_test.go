package service_test

import (
	"context"
	"testing"

	"github.com/ragwatch/ragwatch/config"
)

// Every stream and KV bucket ragwatch creates is capped as the config says (StorageCaps), so
// the embedded store cannot outgrow the volume it lives on and take the app's pod with it.
func TestEveryStreamIsCapped(t *testing.T) {
	cfg := testConfig(t)
	cfg.NATS.Consume.Mode = config.NATSModeJetStream // the intake stream and the dedup bucket too
	e := startEnv(t, cfg)

	want := map[string]int64{}
	for _, sc := range cfg.StorageCaps() {
		want[sc.Name] = sc.MaxBytes
	}
	ctx := context.Background()
	got := map[string]int64{}
	l := e.app.NATS.JS.ListStreams(ctx)
	for info := range l.Info() {
		got[info.Config.Name] = info.Config.MaxBytes
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("streams = %v, want %v", got, want)
	}
	for name, b := range got {
		if b <= 0 {
			t.Errorf("stream %s has no byte cap (max_bytes %d)", name, b)
		} else if want[name] != b {
			t.Errorf("stream %s max_bytes = %d, want %d", name, b, want[name])
		}
	}
}
