package labelcal

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	rwtest "github.com/ragwatch/ragwatch/internal/testutil"
)

func kvStore(t *testing.T) *Store {
	t.Helper()
	s := rwtest.RunJetStream(t)
	_, js := rwtest.Connect(t, s)
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "ragwatch_labelcal", History: 16})
	if err != nil {
		t.Fatal(err)
	}
	return &Store{KV: kv}
}

func TestLearnerFitsStoresAppliesAndReverts(t *testing.T) {
	ctx := context.Background()
	store := kvStore(t)
	reg := prometheus.NewRegistry()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	l, err := NewLearner(LearnerOptions{MinLabels: 200, RefitEvery: 100, Store: store, Registerer: reg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	pairs := biased(400, 5)
	for i, p := range pairs[:199] {
		if m, err := l.Observe(ctx, "support-bot", "faithfulness", p); m != nil || err != nil {
			t.Fatalf("pair %d: fitted %v, err %v before 200 labels", i, m, err)
		}
	}
	if _, _, ok := l.Apply("support-bot", "faithfulness", 0.2); ok {
		t.Fatal("a score mapped before any fit")
	}
	m, err := l.Observe(ctx, "support-bot", "faithfulness", pairs[199])
	if err != nil || m == nil {
		t.Fatalf("200th label: map %v, err %v", m, err)
	}
	if !m.Applied || m.Version == 0 || !m.FittedAt.Equal(now) || m.Service != "support-bot" || m.Metric != "faithfulness" {
		t.Fatalf("first fit %+v", m)
	}
	v, version, ok := l.Apply("support-bot", "faithfulness", 0.125)
	if !ok || version != m.Version || v != m.Apply(0.125) || math.Abs(v-0.5) > 0.2 {
		t.Fatalf("Apply = %v, version %d, ok %v; map gives %v", v, version, ok, m.Apply(0.125))
	}
	// Other series are untouched.
	if v, _, ok := l.Apply("support-bot", "answer_relevancy", 0.125); ok || v != 0.125 {
		t.Errorf("another metric mapped: %v %v", v, ok)
	}
	// The next fit waits RefitEvery new labels.
	for _, p := range pairs[200:299] {
		if m, _ := l.Observe(ctx, "support-bot", "faithfulness", p); m != nil {
			t.Fatal("refit before RefitEvery new labels")
		}
	}
	second, err := l.Observe(ctx, "support-bot", "faithfulness", pairs[299])
	if err != nil || second == nil || second.Version <= m.Version || second.Labels != 300 {
		t.Fatalf("second fit %+v, err %v", second, err)
	}

	// Revert: stored as a new version, scores pass unchanged, and later fits stay reverted.
	rev, err := l.Revert(ctx, "support-bot", "faithfulness")
	if err != nil || !rev.Reverted || rev.Version <= second.Version {
		t.Fatalf("revert %+v, err %v", rev, err)
	}
	if v, _, ok := l.Apply("support-bot", "faithfulness", 0.125); ok || v != 0.125 {
		t.Errorf("reverted map still applied: %v", v)
	}
	var third *Map
	for _, p := range pairs[300:400] {
		if m, err := l.Observe(ctx, "support-bot", "faithfulness", p); err != nil {
			t.Fatal(err)
		} else if m != nil {
			third = m
		}
	}
	if third == nil || !third.Reverted {
		t.Fatalf("fit after a revert: %+v", third)
	}
	hist, err := store.History(ctx, "support-bot", "faithfulness")
	if err != nil || len(hist) != 4 {
		t.Fatalf("history %d versions, err %v", len(hist), err)
	}
	if hist[0].Version != m.Version || hist[2].Version != rev.Version || !hist[2].Reverted || hist[0].Reverted {
		t.Errorf("history %+v", hist)
	}

	// A new process (a restart) loads the newest versions: still reverted, then restored.
	l2, err := NewLearner(LearnerOptions{MinLabels: 200, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	maps := l2.Maps()
	if len(maps) != 1 || maps[0].Version != third.Version || !maps[0].Reverted {
		t.Fatalf("loaded %+v", maps)
	}
	if _, _, ok := l2.Apply("support-bot", "faithfulness", 0.125); ok {
		t.Error("a reverted map applied after restart")
	}
	restored, err := l2.Restore(ctx, "support-bot", "faithfulness")
	if err != nil || restored.Reverted || restored.Version <= third.Version {
		t.Fatalf("restore %+v, err %v", restored, err)
	}
	if v, version, ok := l2.Apply("support-bot", "faithfulness", 0.125); !ok || version != restored.Version || v != restored.Apply(0.125) {
		t.Errorf("restored map: %v %d %v", v, version, ok)
	}
	if _, err := l2.Revert(ctx, "other", "faithfulness"); err != ErrNoMap {
		t.Errorf("revert of an unknown series: %v", err)
	}

	if got := testutil.ToFloat64(l.fits.WithLabelValues("applied")) + testutil.ToFloat64(l.fits.WithLabelValues("not_applied")); got != 3 {
		t.Errorf("fits counted %v, want 3", got)
	}
	if n, err := testutil.GatherAndCount(reg, "ragwatch_label_calibration_fits_total"); err != nil || n != 3 {
		t.Errorf("exported fit outcomes %d, err %v", n, err)
	}
}

func TestLearnerRefusesBadPairsAndBoundsSeries(t *testing.T) {
	ctx := context.Background()
	l, err := NewLearner(LearnerOptions{MaxSeries: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Pair{{math.NaN(), 1}, {0.5, 1.5}, {-0.1, 0}} {
		if _, err := l.Observe(ctx, "s", "faithfulness", p); err == nil || !strings.Contains(err.Error(), "must be in [0, 1]") {
			t.Errorf("%v: err %v", p, err)
		}
	}
	if got := testutil.ToFloat64(l.dropped.WithLabelValues("invalid")); got != 3 {
		t.Errorf("invalid counted %v", got)
	}
	for _, svc := range []string{"a", "b"} {
		if _, err := l.Observe(ctx, svc, "faithfulness", Pair{0.5, 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Observe(ctx, "c", "faithfulness", Pair{0.5, 1}); err == nil {
		t.Error("a third series accepted with MaxSeries 2")
	}
	if got := testutil.ToFloat64(l.dropped.WithLabelValues("series_limit")); got != 1 {
		t.Errorf("series_limit counted %v", got)
	}
}

func TestStoreWriteFailureKeepsThePreviousMap(t *testing.T) {
	ctx := context.Background()
	store := kvStore(t)
	l, err := NewLearner(LearnerOptions{MinLabels: 200, RefitEvery: 50, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	pairs := biased(250, 6)
	for _, p := range pairs[:200] {
		if _, err := l.Observe(ctx, "svc", "faithfulness", p); err != nil {
			t.Fatal(err)
		}
	}
	first := l.Maps()[0]
	// A cancelled context makes the next store write fail.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var failed error
	for _, p := range pairs[200:250] {
		if _, err := l.Observe(cancelled, "svc", "faithfulness", p); err != nil {
			failed = err
		}
	}
	if failed == nil {
		t.Fatal("store write with a cancelled context did not fail")
	}
	if got := l.Maps()[0]; got.Version != first.Version {
		t.Errorf("version %d in use after a failed write, want %d", got.Version, first.Version)
	}
	if got := testutil.ToFloat64(l.fits.WithLabelValues("store_failed")); got != 1 {
		t.Errorf("store_failed counted %v", got)
	}
}
