package engine

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts"
)

type metrics struct {
	samples, weight, weight2, wx, wxNeg, wxx *prometheus.CounterVec

	value, bound, budget, burn, firing, drift *prometheus.GaugeVec
	changeDetected, changeStatistic           *prometheus.GaugeVec
	rejected, saves                           *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	sv := []string{"slo", "service"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, sv)
	}
	m := &metrics{
		samples: counter(alerts.MetricSamples, "Samples observed by an SLO (for a burn-rate SLO, scored requests)."),
		weight:  counter(alerts.MetricWeight, "Sum of sample weights w = 1/p (p: the sampling probability) observed by an SLO."),
		weight2: counter(alerts.MetricWeightSquared, "Sum of squared sample weights observed by an SLO (effective sample size)."),
		wx: counter(alerts.MetricWeightedValue,
			"Sum of w·x over non-negative values x observed by an SLO; x is 1 (good) or 0 (bad) for burn-rate SLOs."),
		wxNeg: counter(alerts.MetricWeightedValueNeg, "Sum of w·|x| over negative values x observed by an SLO."),
		wxx:   counter(alerts.MetricWeightedValueSquared, "Sum of w·x² observed by an SLO (variance of the weighted mean)."),
		value: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: alerts.MetricSLOValue,
			Help: "Current window value of an SLO: the weighted mean (threshold) or the good ratio over the first long window (burn rate)."}, sv),
		bound: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: alerts.MetricSLOBound,
			Help: "95% confidence bound of a threshold SLO's weighted mean."}, []string{"slo", "service", "bound"}),
		budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: alerts.MetricBudgetRemaining,
			Help: "Share of a burn-rate SLO's error budget left over its period (1 untouched, negative overspent)."}, sv),
		burn: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: alerts.MetricBurnRate,
			Help: "Error budget burn rate of a burn-rate SLO over a window (1 spends the budget exactly over the period)."},
			[]string{"slo", "service", "window"}),
		firing: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: alerts.MetricAlertsFiring,
			Help: "Alerts firing, by SLO or drift detector and severity."}, []string{"slo", "severity"}),
		drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: alerts.MetricDriftScore,
			Help: "Latest drift score of a detector (PSI, KS distance or JS divergence in bits)."}, []string{"detector", "service"}),
		changeDetected: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: alerts.MetricChangeDetected,
			Help: "1 while a change SLO's detector holds a detected change of the metric's level, else 0."}, sv),
		changeStatistic: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: alerts.MetricChangeStatistic,
			Help: "A change SLO's largest CUSUM statistic over its threshold: it detects a change at 1."}, sv),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: alerts.MetricInputsRejected,
			Help: "Values the alert engine refused (non-finite value or weight, or outside [0,1] for a change SLO)."}, []string{"reason"}),
		saves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: alerts.MetricStateSaves,
			Help: "Alert window state saves, by outcome."}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.samples, m.weight, m.weight2, m.wx, m.wxNeg, m.wxx,
		m.value, m.bound, m.budget, m.burn, m.firing, m.drift, m.changeDetected, m.changeStatistic, m.rejected, m.saves} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// forget deletes every series of a rule's instance for service (Engine.forget).
func (m *metrics) forget(r *rule, service string) {
	if r.kind == alerts.KindDrift {
		m.drift.DeletePartialMatch(prometheus.Labels{"detector": r.name, "service": service})
		return
	}
	l := prometheus.Labels{"slo": r.name, "service": service}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.samples, m.weight, m.weight2,
		m.wx, m.wxNeg, m.wxx, m.value, m.bound, m.budget, m.burn, m.changeDetected, m.changeStatistic} {
		v.DeletePartialMatch(l)
	}
}

// sloCounters are one (slo, service)'s counters, resolved once.
type sloCounters struct {
	samples, weight, weight2, wx, wxNeg, wxx prometheus.Counter
}

func (m *metrics) sloCounters(slo, service string) sloCounters {
	return sloCounters{
		samples: m.samples.WithLabelValues(slo, service),
		weight:  m.weight.WithLabelValues(slo, service),
		weight2: m.weight2.WithLabelValues(slo, service),
		wx:      m.wx.WithLabelValues(slo, service),
		wxNeg:   m.wxNeg.WithLabelValues(slo, service),
		wxx:     m.wxx.WithLabelValues(slo, service),
	}
}

func (c sloCounters) add(x, w float64) {
	c.samples.Inc()
	c.weight.Add(w)
	c.weight2.Add(w * w)
	if x >= 0 {
		c.wx.Add(w * x)
	} else {
		c.wxNeg.Add(-w * x)
	}
	c.wxx.Add(w * x * x)
}
