package service_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestDefaultFaithfulnessChangeDetection is the user scenario with the default config
// (so the default SLOs), sampling.rate 1 and the builtin scorer: 40 records a second, 5 %
// unfaithful for 90 s, then 45 %. The faithfulness alert fires within 30 s of the change, no
// alert fires before it, and its change_time is within 20 s of the true change. Time is the
// app's clock, advanced one second at a time once the second's scores reached the engine.
func TestDefaultFaithfulnessChangeDetection(t *testing.T) {
	cfg := testConfig(t)
	cfg.Sampling.Rate = 1
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a, err := service.New(cfg, nil, service.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(ctx)
	if !hasChangeSLO(cfg, "faithfulness") {
		t.Fatal("the default faithfulness SLO is not a change SLO")
	}
	r := rand.New(rand.NewPCG(48, 48))
	const doc = "Enterprise costs $50 a month and includes SSO, audit logs and a dedicated support engineer."
	seq := 0
	change := now.Add(90 * time.Second)
	var fired *alerts.Alert
	for sec := 0; sec < 150 && fired == nil; sec++ {
		bad := 0.05
		if sec >= 90 {
			bad = 0.45
		}
		for i := 0; i < 40; i++ {
			seq++
			answer := "Enterprise includes SSO and audit logs [1]."
			if r.Float64() < bad {
				answer = "Enterprise ships a free pony, unlimited rockets and a castle on the moon [1]."
			}
			rec := &record.Record{TraceID: fmt.Sprintf("%032x", uint64(seq)*0x9e3779b97f4a7c15), Service: "chat", Time: clock(),
				Query: "What does Enterprise include?", Answer: answer,
				Documents: []record.Document{{ID: "ent", Content: doc}}}
			if err := a.Records.ConsumeRecord(ctx, rec); err != nil {
				t.Fatal(err)
			}
		}
		want := float64(seq)
		testutil.Eventually(t, 10*time.Second, 2*time.Millisecond, fmt.Sprintf("second %d: %v scores at the engine", sec, want), func() bool {
			return scoredFaithfulness(a) >= want
		})
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		if sec%15 != 14 {
			continue
		}
		for _, al := range a.Alerts.Evaluate(ctx) {
			if !al.Firing() {
				continue
			}
			if clock().Before(change) {
				t.Fatalf("an alert fired before the change: %s %s", al.Rule, al.Summary)
			}
			if al.Rule == "faithfulness" {
				fired = &al
			}
		}
	}
	if fired == nil {
		t.Fatal("no faithfulness alert within 60 s of the change")
	}
	delay := fired.StartsAt.Sub(change)
	t.Logf("fired %v after the change; change_time %s; %s", delay, fired.ChangeTimeText(), fired.Summary)
	if delay > 30*time.Second || fired.ChangeTime == nil || math.Abs(fired.ChangeTime.Sub(change).Seconds()) > 20 ||
		fired.Kind != alerts.KindChange || !strings.Contains(fired.Summary, "dropped") {
		t.Fatalf("alert: %+v", fired)
	}
}

func hasChangeSLO(cfg *config.Config, name string) bool {
	for _, s := range cfg.SLOs {
		if s.Name == name && s.Kind == config.SLOChange {
			return true
		}
	}
	return false
}

// scoredFaithfulness is how many faithfulness values the engine's faithfulness SLO took.
func scoredFaithfulness(a *service.App) float64 {
	mfs, err := a.Registry.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != alerts.MetricSamples {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelString(m.GetLabel()) == `{service="chat",slo="faithfulness"}` {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
