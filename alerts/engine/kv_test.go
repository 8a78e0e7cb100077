package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func startJetStream(t *testing.T, dir string) (*server.Server, jetstream.KeyValue, func()) {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_alerts", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	return s, kv, func() {
		nc.Close()
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// TestRestartKeepsStateInJetStreamKV restarts both ragwatch (a new engine) and the NATS server
// (same store dir) between save and load.
func TestRestartKeepsStateInJetStreamKV(t *testing.T) {
	dir := t.TempDir()
	_, kv, stop := startJetStream(t, dir)
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
	stop()

	_, kv2, stop2 := startJetStream(t, dir)
	defer stop2()
	h2 := newHarness(t, thresholdCfg, KVStore{KV: kv2})
	h2.clk.t = firedAt.Add(time.Minute)
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
