package export

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func bucketKeys(t *testing.T, kv jetstream.KeyValue) []string {
	t.Helper()
	keys, err := kv.Keys(context.Background())
	if err != nil && err != jetstream.ErrNoKeysFound {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

func persistedStore(t *testing.T, kv jetstream.KeyValue, maxRecords int) *Store {
	t.Helper()
	s := newStore(t, Options{MaxRecords: maxRecords})
	if err := s.Persist(PersistOptions{KV: kv, FlushInterval: time.Hour, Registerer: prometheus.NewRegistry()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func keysOf(lines []Line) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l.TraceID)
	}
	slices.Sort(out)
	return out
}

// The bucket holds one key per kept record, never more than max_records: an evicted record's
// key is reused, a record seen again keeps its key; a restart reads back the same records in
// the same order with their scores and labels, and a smaller max_records keeps the newest and
// deletes the other keys.
func TestStoreSurvivesRestart(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_export", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := persistedStore(t, kv, 3)
	add := func(s *Store, id string) {
		t.Helper()
		if err := s.ConsumeRecord(ctx, &record.Record{TraceID: id, Service: "chat", Time: t0, Query: "q " + id, Answer: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a", "b", "c", "d", "b", "b", "e"} { // a and c go
		add(s, id)
	}
	_ = s.ConsumeScores(ctx, []score.Result{{TraceID: "d", Metric: "faithfulness", Value: 0.5}})
	_ = s.ConsumeLabel(ctx, record.Label{TraceID: "e", Values: map[string]float64{"faithfulness": 1}})
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	if keys := bucketKeys(t, kv); len(keys) != 3 {
		t.Fatalf("bucket keys %v, want 3 (max_records)", keys)
	}
	want := s.Select(10, time.Time{})

	s2 := persistedStore(t, kv, 3)
	if s2.Loaded() != 3 {
		t.Fatalf("loaded %d", s2.Loaded())
	}
	got := s2.Select(10, time.Time{})
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Fatalf("after restart:\n%s\nwant\n%s", gj, wj)
	}
	if got[0].Scores["faithfulness"] != 0.5 || got[2].Labels == nil || got[2].Labels.Values["faithfulness"] != 1 {
		t.Fatalf("scores or labels lost: %+v", got)
	}
	add(s2, "f") // evicts d, the oldest after restart (b was seen again after it)
	_ = s2.Shutdown(ctx)
	if keys := bucketKeys(t, kv); len(keys) != 3 {
		t.Fatalf("bucket keys %v, want 3", keys)
	}

	s3 := persistedStore(t, kv, 2) // a smaller max_records: the two newest, two keys
	if got := keysOf(s3.Select(10, time.Time{})); !slices.Equal(got, []string{"e", "f"}) {
		t.Fatalf("kept %v, want [e f]", got)
	}
	_ = s3.Shutdown(ctx)
	if keys := bucketKeys(t, kv); !slices.Equal(keys, []string{"r.0", "r.1"}) {
		t.Fatalf("bucket keys %v, want [r.0 r.1]", keys)
	}
	s4 := persistedStore(t, kv, 2)
	if got := keysOf(s4.Select(10, time.Time{})); !slices.Equal(got, []string{"e", "f"}) {
		t.Fatalf("kept %v after the second restart, want [e f]", got)
	}
	_ = s4.Shutdown(ctx)
}
