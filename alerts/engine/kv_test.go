package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// startJetStream starts JetStream storing in dir and opens the alerts bucket on it.
func startJetStream(t *testing.T, dir string) (*server.Server, jetstream.KeyValue) {
	t.Helper()
	s := testutil.RunJetStream(t, testutil.StoreDir(dir))
	_, js := testutil.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_alerts", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	return s, kv
}

// TestRestartKeepsStateInJetStreamKV restarts both ragwatch (a new engine) and the NATS server
// (same store dir) between save and load.
func TestRestartKeepsStateInJetStreamKV(t *testing.T) {
	dir := t.TempDir()
	ns, kv := startJetStream(t, dir)
	store := KVStore{KV: kv}
	if _, err := store.Load(context.Background(), "slo.none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	if keys, err := store.List(context.Background(), "slo."); err != nil || len(keys) != 0 {
		t.Fatalf("empty bucket list: %v %v", keys, err)
	}
	h := newHarness(t, thresholdCfg, store)
	for i := 0; i < 60; i++ {
		h.score(t, "citation_precision", fmt.Sprint("b", i), 0.4, 1)
	}
	h.e.Evaluate(context.Background())
	h.clk.Add(2 * time.Minute)
	if out := h.e.Evaluate(context.Background()); len(out) != 1 || !out[0].Firing() {
		t.Fatalf("want firing: %+v", out)
	}
	firedAt := h.clk.Now()
	if err := h.e.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	if keys, err := store.List(context.Background(), "slo.cp."); err != nil || len(keys) != 1 || keys[0] != "slo.cp.c2VhcmNo" {
		t.Fatalf("keys = %v %v, want [slo.cp.c2VhcmNo] (base64url of search)", keys, err)
	}
	ns.Shutdown() // the NATS server restarts too
	ns.WaitForShutdown()

	_, kv2 := startJetStream(t, dir)
	h2 := newHarness(t, thresholdCfg, KVStore{KV: kv2})
	h2.clk.Set(firedAt.Add(time.Minute))
	if err := h2.e.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := h2.e.Evaluate(context.Background())
	if len(out) != 1 || !out[0].Firing() || !out[0].StartsAt.Equal(firedAt) || out[0].N != 60 || out[0].Evidence[0].TraceID == "" {
		t.Fatalf("after restart: %+v", out)
	}
	// The window keeps sliding: ten minutes later the old samples are gone and the alert
	// resolves after keep_firing_for.
	h2.clk.Add(10 * time.Minute)
	h2.e.Evaluate(context.Background())
	h2.clk.Add(2 * time.Minute)
	if out := h2.e.Evaluate(context.Background()); len(out) != 1 || out[0].Status != "resolved" {
		t.Fatalf("want resolved once the window emptied: %+v", out)
	}
}
