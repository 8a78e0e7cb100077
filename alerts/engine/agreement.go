package engine

import (
	"time"

	"github.com/ragwatch/ragwatch/alerts/slo"
)

// AgreementService is the `service` an agreement SLO's instance is kept under: agreement is
// measured over the labels of every service together.
const AgreementService = "all"

// ObserveAgreement implements judgeagreement.Sink: one statistic of a judge's agreement with
// people feeds the SLOs on its metric (judgeagreement.Metric, e.g.
// agreement_spearman_faithfulness), with weight 1, under AgreementService.
func (e *Engine) ObserveAgreement(metric string, v float64, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.byMetric[metric] {
		if r.service != "" && r.service != AgreementService {
			continue
		}
		r.add(e.instance(r, AgreementService), now, v, 1, slo.Sample{Value: v, Time: now})
	}
}
