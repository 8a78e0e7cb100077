package engine

import (
	"time"

	"github.com/ragwatch/ragwatch/alerts/changepoint"
	"github.com/ragwatch/ragwatch/alerts/diagnose"
	"github.com/ragwatch/ragwatch/alerts/diagnosis"
	"github.com/ragwatch/ragwatch/alerts/drift"
	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/config"
)

// The packages the engine drives (alerts/slo, alerts/drift, alerts/diagnosis) take their own
// small types so they stay free of config; these functions are the one place a config section
// becomes them.

// burnPairs converts a burn-rate SLO's `burn_rates`.
func burnPairs(ws []config.BurnRateWindow) []slo.Pair {
	out := make([]slo.Pair, len(ws))
	for i, w := range ws {
		out[i] = slo.Pair{Severity: w.Severity, LongWindow: time.Duration(w.LongWindow), ShortWindow: time.Duration(w.ShortWindow), Factor: w.Factor}
	}
	return out
}

// goodWhen converts a burn-rate SLO's `good_when`, parsed when the config loaded.
func goodWhen(g config.GoodWhen) slo.Good {
	return slo.Good{Op: g.Op, Value: g.Value}
}

// changeSettings converts a change SLO's `direction`, `min_shift`, `false_alarms`,
// `reference` and `min_samples`.
func changeSettings(s config.SLO) changepoint.Settings {
	return changepoint.Settings{Up: s.Direction == config.DirectionUp, MinShift: s.MinShift, FalseAlarmEvery: s.FalseAlarms.Every,
		HalfLife: time.Duration(s.Reference), MinSamples: int64(s.MinSamples)}
}

// diagnosisSettings converts `alerting.diagnosis`.
func diagnosisSettings(c config.Diagnosis) diagnosis.Settings {
	return diagnosis.Settings{Thresholds: diagnose.Thresholds{Low: c.Low, High: c.High, MinSamples: int64(c.MinSamples), Drop: c.Drop},
		Window: time.Duration(c.Window)}
}

// driftDetector converts one `drift.detectors` entry.
func driftDetector(d config.DriftDetector) drift.Detector {
	return drift.Detector{Name: d.Name, Signal: d.Signal, Service: d.Service, Method: driftMethod(d.Method), Buckets: d.Buckets}
}

// driftDetectors converts the `drift.detectors` section.
func driftDetectors(ds []config.DriftDetector) []drift.Detector {
	out := make([]drift.Detector, len(ds))
	for i, d := range ds {
		out[i] = driftDetector(d)
	}
	return out
}

func driftMethod(m string) string {
	switch m {
	case config.DriftKS:
		return drift.MethodKS
	case config.DriftJS:
		return drift.MethodJS
	}
	return drift.MethodPSI // config validation admits only psi, ks and js
}
