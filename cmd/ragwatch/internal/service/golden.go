package service

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/rules"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/sampler/golden"
)

// golden builds the judges' golden-set canary (golden.file): the in-process scorers re-judge
// the set on a schedule and when a judge's definition or model changes, the cost is charged to
// the sampler's budget, the previous run is kept in golden.bucket, and drift becomes
// RagwatchJudgeDrift alerts through the notifiers.
func (b *builder) golden() (lifecycle, error) {
	g := b.cfg.Golden
	if g.File == "" {
		return lifecycle{}, nil
	}
	if len(b.active) == 0 {
		return lifecycle{}, fmt.Errorf("golden.file: no scorer runs in this process (scoring.workers is 0); the golden set is judged where the judges run")
	}
	f, err := os.Open(g.File)
	if err != nil {
		return lifecycle{}, fmt.Errorf("golden.file: %w", err)
	}
	items, err := golden.ReadItems(f, g.File, g.MaxItems, b.o.now())
	f.Close()
	if err != nil {
		return lifecycle{}, fmt.Errorf("golden.file: %w", err)
	}
	kv, err := b.NATS.KeyValue(b.ctx, g.Bucket, 0, g.MaxBytes)
	if err != nil {
		return lifecycle{}, fmt.Errorf("golden.bucket: %w", err)
	}
	b.NATS.Store().Watch("golden", kvStream(g.Bucket))
	cfg, judges, notify := b.cfg, b.Judges, b.Notify
	alerter := &goldenAlerts{firing: map[string]alerts.Alert{}, send: notify.Send}
	c, err := golden.New(golden.Settings{
		Items:            items,
		Scorers:          b.active,
		Versions:         func() map[string]string { return judgeFingerprints(judges.Versions(), cfg) },
		Interval:         g.Interval,
		CheckInterval:    g.CheckInterval,
		Tolerance:        g.Tolerance,
		MaxChanged:       g.MaxChanged,
		MaxAgreementDrop: g.MaxAgreementDrop,
		MinAgreement:     g.MinAgreement,
		Store:            golden.KVStore{KV: kv},
		Budget:           b.Sampler.Budget,
		Sink:             alerter.consume,
		Registerer:       b.Registry,
		Logger:           b.logger("golden"),
		Now:              b.o.now,
	})
	if err != nil {
		return lifecycle{}, err
	}
	b.Golden = c
	return lifecycle{start: c.Start, shutdown: c.Shutdown}, nil
}

// judgeFingerprints adds to each configured judge's definition version the model of its
// backend: a judge is "changed" when either changes. The config read is the one at start: a
// backend's model changes with a restart, which the stored previous run then shows.
func judgeFingerprints(versions map[string]string, cfg *config.Config) map[string]string {
	out := make(map[string]string, len(versions))
	for m, v := range versions {
		out[m] = v
	}
	for _, j := range cfg.Judges {
		v, ok := out[j.Metric()]
		if !ok {
			continue
		}
		var model string
		switch j.JudgeBackend(cfg.Scoring) {
		case config.BackendOpenAI:
			model = cfg.Scoring.OpenAI.Model
		case config.BackendAnthropic:
			model = cfg.Scoring.Anthropic.Model
		}
		if model != "" {
			out[j.Metric()] = v + "@" + model
		}
	}
	return out
}

// goldenAlerts turns each run's drifting series into firing RagwatchJudgeDrift alerts and
// resolves those of series that no longer drift.
type goldenAlerts struct {
	mu     sync.Mutex
	firing map[string]alerts.Alert // by series key
	send   func(context.Context, []alerts.Alert)
}

func (g *goldenAlerts) consume(ctx context.Context, rep golden.Report) {
	g.mu.Lock()
	var out []alerts.Alert
	seen := map[string]bool{}
	for _, s := range rep.Series {
		seen[s.Key()] = true
		if s.Drift {
			a := judgeDriftAlert(rep, s)
			if old, ok := g.firing[s.Key()]; ok {
				a.StartsAt = old.StartsAt
			}
			g.firing[s.Key()] = a
			out = append(out, a)
			continue
		}
		if a, ok := g.firing[s.Key()]; ok {
			a.Status, a.EndsAt = alerts.StatusResolved, rep.Time
			delete(g.firing, s.Key())
			out = append(out, a)
		}
	}
	g.mu.Unlock()
	if len(out) > 0 && g.send != nil {
		g.send(ctx, out)
	}
}

// judgeDriftAlert names the judge, the metric, why, and the items that changed (golden item
// ids: the operator's names for records of the golden file, not user traffic).
func judgeDriftAlert(rep golden.Report, s golden.Series) alerts.Alert {
	labels := map[string]string{"alertname": rules.NameJudgeDrift, "severity": "warning", "judge": s.Judge, "metric": s.Metric}
	a := alerts.Alert{Fingerprint: alerts.Fingerprint(labels), Name: rules.NameJudgeDrift, Kind: "judge_drift",
		Rule: "golden", Severity: "warning", Status: alerts.StatusFiring, Labels: labels, Metric: s.Metric,
		Value: s.Agreement, N: int64(s.N), StartsAt: rep.Time, Evidence: []alerts.Evidence{}, Comparator: "<"}
	if s.Defined {
		a.Interval = &alerts.Interval{Lower: s.Lower, Upper: s.Upper, Level: 0.95}
	}
	if s.Previous != nil {
		a.Threshold = *s.Previous
	}
	a.Summary = fmt.Sprintf("Judge %s drifted on %s: golden-set agreement %s", s.Judge, s.Metric, alerts.FormatValue(s.Agreement))
	desc := strings.Join(s.Reasons, "; ")
	if len(s.Changed) > 0 && !strings.Contains(desc, "items moved") {
		desc += "; changed items: " + golden.ChangedItems(s.Changed, 10)
	}
	a.Description = fmt.Sprintf("Golden set run (%s) of %d items: %s.", rep.Reason, s.N, desc)
	return a
}
