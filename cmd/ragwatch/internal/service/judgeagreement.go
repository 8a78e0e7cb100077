package service

import (
	"fmt"
	"time"

	"github.com/ragwatch/ragwatch/alerts/judgeagreement"
	"github.com/ragwatch/ragwatch/config"
)

// judgeAgreement builds the tracker that pairs human labels with judge scores; the alert
// engine (built before it) is its sink.
func (b *builder) judgeAgreement() (lifecycle, error) {
	o := judgeagreement.Options{Settings: agreementSettings(b.cfg.Alerting),
		Registerer: b.Registry, Now: b.o.now, Sink: b.Alerts}
	if b.Calibration != nil {
		o.OnPair = b.Calibration.Offer // builtin pairs, with the raw value, to the learner
	}
	t, err := judgeagreement.New(o)
	if err != nil {
		return lifecycle{}, fmt.Errorf("build judge agreement: %w", err)
	}
	b.Agreement = t
	return lifecycle{start: t.Start, shutdown: t.Shutdown}, nil
}

// agreementSettings converts alerting.agreement, pruned on the engine's evaluation interval.
func agreementSettings(a config.Alerting) judgeagreement.Settings {
	return judgeagreement.Settings{Window: time.Duration(a.Agreement.Window), MinSamples: a.Agreement.MinSamples,
		MaxPairs: a.Agreement.MaxPairs, MaxRecords: a.Agreement.MaxRecords, MaxSeries: a.Agreement.MaxSeries,
		PruneEvery: a.EvaluationInterval}
}
