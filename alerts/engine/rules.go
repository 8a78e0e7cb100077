package engine

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/changepoint"
	"github.com/ragwatch/ragwatch/alerts/drift"
	"github.com/ragwatch/ragwatch/alerts/internal/ring"
	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/config"
)

// sloBucket is one time bucket of an SLO window: the weighted sums and the worst samples.
type sloBucket struct {
	S     slo.Sums  `json:"s"`
	Worst slo.Worst `json:"x,omitempty"`
}

// driftBucket is one time bucket of a drift detector: a histogram and, per bin, the latest
// request that fell in it (evidence).
type driftBucket struct {
	H  drift.Hist   `json:"h"`
	Ex []slo.Sample `json:"e,omitempty"`
	// Anomalous marks a bucket seen while the detector breached: it is kept out of the
	// trailing reference so an incident does not become "normal" and its recovery does not
	// look like drift.
	Anomalous bool `json:"a,omitempty"`
}

// rule is one configured SLO or drift detector with its per-service instances.
type rule struct {
	kind      string // alerts.Kind*
	name      string
	metric    string
	service   string // filter; "" = every service separately
	minTurn   int    // filter: values of this turn or later only (0: every value)
	variant   string // filter; "" = every variant together
	labels    map[string]string
	notifiers []string
	runbook   string
	dashboard string
	forDur    time.Duration
	keep      time.Duration

	sloCfg config.SLO
	pairs  []slo.Pair // sloCfg.BurnRates for the slo package
	th     slo.Threshold
	good   slo.Good
	change changepoint.Settings // kind change
	fineW  time.Duration        // bucket widths and spans
	fineS  time.Duration
	coarsW time.Duration
	coarsS time.Duration

	det         config.DriftDetector
	detector    drift.Detector // det for the drift package
	edges       []float64
	driftWindow time.Duration
	refWindow   time.Duration

	instances map[string]*instance
}

// instance is a rule's state for one service. Exported fields are persisted.
type instance struct {
	Fine     *ring.Ring[sloBucket]    `json:"fine,omitempty"`
	Coarse   *ring.Ring[slo.Sums]     `json:"coarse,omitempty"`
	Drift    *ring.Ring[driftBucket]  `json:"drift,omitempty"`
	Change   *changepoint.State       `json:"change,omitempty"` // kind change: the detector
	Machines map[string]*Machine      `json:"machines"`
	Last     map[string]*alerts.Alert `json:"last,omitempty"` // latest alert per severity

	counters sloCounters
}

// active reports whether an alert of the instance is pending or firing.
func (in *instance) active() bool {
	for _, m := range in.Machines {
		if m.Phase != phaseInactive {
			return true
		}
	}
	return false
}

func newSLORule(s config.SLO, dashboard string) *rule {
	r := &rule{kind: alerts.KindThreshold, name: s.Name, metric: s.Metric, service: s.Service, minTurn: s.MinTurn, variant: s.Variant, labels: s.Labels,
		notifiers: s.Notifiers, runbook: s.RunbookURL.Reveal(), dashboard: s.DashboardURL.Reveal(), forDur: time.Duration(s.For), keep: time.Duration(s.KeepFiringFor),
		sloCfg: s, instances: map[string]*instance{}}
	if r.dashboard == "" {
		r.dashboard = dashboard
	}
	switch s.Kind {
	case config.SLOBurnRate:
		r.kind, r.good, r.pairs = alerts.KindBurnRate, goodWhen(s.GoodWhen), burnPairs(s.BurnRates)
		r.fineW, r.fineS, r.coarsW, r.coarsS = slo.Resolutions(r.pairs, time.Duration(s.Period))
	case config.SLOChange:
		r.kind, r.change = alerts.KindChange, changeSettings(s)
		r.th = slo.Threshold{Below: s.Direction != config.DirectionUp} // orders the evidence
		// The fine ring keeps only the evidence: the worst samples of the last evidenceSpan.
		r.fineW, r.fineS = slo.ThresholdWidth(evidenceSpan), evidenceSpan
	default:
		r.th = slo.Threshold{MinSamples: int64(s.MinSamples), Hysteresis: s.Hysteresis, OnMean: s.Decision == config.DecisionMean}
		if s.AlertBelow != nil {
			r.th.Below, r.th.Limit = true, *s.AlertBelow
		} else {
			r.th.Limit = *s.AlertAbove
		}
		r.fineW, r.fineS = slo.ThresholdWidth(time.Duration(s.Window)), time.Duration(s.Window)
	}
	return r
}

func newDriftRule(d config.DriftDetector, cfg config.Drift, dashboard string) *rule {
	r := &rule{kind: alerts.KindDrift, name: d.Name, metric: d.Signal, service: d.Service, variant: d.Variant, labels: d.Labels,
		notifiers: d.Notifiers, runbook: d.RunbookURL.Reveal(), dashboard: d.DashboardURL.Reveal(), forDur: time.Duration(d.For), keep: time.Duration(d.KeepFiringFor),
		det: d, detector: driftDetector(d), driftWindow: time.Duration(cfg.Window), refWindow: time.Duration(cfg.ReferenceWindow), instances: map[string]*instance{}}
	r.edges = r.detector.Edges()
	if r.dashboard == "" {
		r.dashboard = dashboard
	}
	r.fineW = max(time.Second, (r.driftWindow / 12).Truncate(time.Second))
	r.fineS = r.driftWindow + r.refWindow
	return r
}

// storeKey names the rule's persisted state.
func (r *rule) storeKey() string {
	if r.kind == alerts.KindDrift {
		return "drift." + r.name
	}
	return "slo." + r.name
}

func (r *rule) newInstance() *instance {
	in := &instance{Machines: map[string]*Machine{}, Last: map[string]*alerts.Alert{}}
	switch r.kind {
	case alerts.KindDrift:
		in.Drift = ring.New[driftBucket](r.fineW, r.fineS)
	case alerts.KindBurnRate:
		in.Fine = ring.New[sloBucket](r.fineW, r.fineS)
		in.Coarse = ring.New[slo.Sums](r.coarsW, r.coarsS)
	case alerts.KindChange:
		in.Fine = ring.New[sloBucket](r.fineW, r.fineS)
		in.Change = changepoint.New(r.change)
	default:
		in.Fine = ring.New[sloBucket](r.fineW, r.fineS)
	}
	return in
}

// compatible reports whether a restored instance has the rings this rule needs now.
func (r *rule) compatible(in *instance) bool {
	want := r.newInstance()
	ok := true
	if want.Fine != nil {
		ok = ok && want.Fine.Compatible(in.Fine)
	}
	if want.Coarse != nil {
		ok = ok && want.Coarse.Compatible(in.Coarse)
	}
	if want.Drift != nil {
		ok = ok && want.Drift.Compatible(in.Drift)
	}
	if want.Change != nil {
		ok = ok && in.Change.Compatible(r.change)
	}
	return ok
}

// add records one value at now.
func (r *rule) add(in *instance, now time.Time, x, w float64, s slo.Sample) {
	switch r.kind {
	case alerts.KindDrift:
		b := in.Drift.At(now)
		if b == nil {
			return
		}
		if len(b.H.Counts) != len(r.edges)+1 {
			b.H = drift.NewHist(len(r.edges) + 1)
		}
		if len(b.Ex) != len(r.edges)+1 {
			b.Ex = make([]slo.Sample, len(r.edges)+1)
		}
		if m := in.Machines[r.det.Severity]; m != nil && m.Phase != phaseInactive {
			b.Anomalous = true
		}
		bin := drift.Bin(r.edges, x)
		b.H.Counts[bin] += w
		b.H.N++
		b.Ex[bin] = s
	case alerts.KindBurnRate:
		good := r.good.Is(x)
		v := b2f(good)
		if b := in.Fine.At(now); b != nil {
			b.S.Add(v, w)
			if !good {
				b.Worst.Offer(s, r.good.Badness)
			}
		}
		if c := in.Coarse.At(now); c != nil {
			c.Add(v, w)
		}
		in.counters.add(v, w)
	case alerts.KindChange:
		in.Change.Observe(r.change, now, x, w)
		if b := in.Fine.At(now); b != nil {
			b.S.Add(x, w)
			b.Worst.Offer(s, r.th.Badness)
		}
		in.counters.add(x, w)
	default:
		if b := in.Fine.At(now); b != nil {
			b.S.Add(x, w)
			b.Worst.Offer(s, r.th.Badness)
		}
		in.counters.add(x, w)
	}
}

// evaluation is what one rule instance decided at one tick, per severity.
type evaluation struct {
	severity  string
	breach    bool
	recovered bool
	alert     alerts.Alert // facts; status and times are set by the engine
}

func (r *rule) fineSums(in *instance, now time.Time, window time.Duration) (slo.Sums, []slo.Worst) {
	var s slo.Sums
	var worst []slo.Worst
	in.Fine.Window(now, window, func(b *sloBucket) {
		s.Merge(b.S)
		if len(b.Worst) > 0 {
			worst = append(worst, b.Worst)
		}
	})
	return s, worst
}

func (r *rule) windowSums(in *instance, now time.Time, window time.Duration) slo.Sums {
	if window <= r.fineS {
		s, _ := r.fineSums(in, now, window)
		return s
	}
	var s slo.Sums
	in.Coarse.Window(now, window, func(b *slo.Sums) { s.Merge(*b) })
	return s
}

func (r *rule) evidence(samples []slo.Sample, service, traceTmpl string) []alerts.Evidence {
	out := make([]alerts.Evidence, 0, len(samples))
	for _, s := range samples {
		out = append(out, alerts.Evidence{TraceID: s.TraceID, SpanID: s.SpanID, Value: s.Value, Time: s.Time,
			URL: alerts.TraceURL(traceTmpl, s.TraceID, service)})
	}
	return out
}

func (r *rule) baseAlert(name, service, severity string) alerts.Alert {
	key := "slo"
	if r.kind == alerts.KindDrift {
		key = "detector"
	}
	labels := map[string]string{"alertname": name, key: r.name, "service": service, "severity": severity}
	if r.variant != "" {
		labels["variant"] = r.variant
	}
	for k, v := range r.labels {
		labels[k] = v
	}
	return alerts.Alert{Fingerprint: alerts.Fingerprint(labels), Name: name, Kind: r.kind, Rule: r.name,
		Service: service, Severity: severity, Labels: labels, Metric: r.metric, RunbookURL: r.runbook,
		DashboardURL: r.dashboard, Notifiers: r.notifiers, Evidence: []alerts.Evidence{}}
}

// evaluate decides on one instance at now and updates its gauges.
func (r *rule) evaluate(e *Engine, service string, in *instance, now time.Time) []evaluation {
	switch r.kind {
	case alerts.KindDrift:
		return r.evalDrift(e, service, in, now)
	case alerts.KindBurnRate:
		return r.evalBurn(e, service, in, now)
	case alerts.KindChange:
		return r.evalChange(e, service, in, now)
	}
	return r.evalThreshold(e, service, in, now)
}

func (r *rule) evalThreshold(e *Engine, service string, in *instance, now time.Time) []evaluation {
	sums, worst := r.fineSums(in, now, time.Duration(r.sloCfg.Window))
	v := r.th.Evaluate(sums)
	e.m.value.WithLabelValues(r.name, service).Set(slo.Finite(v.Value))
	e.m.bound.WithLabelValues(r.name, service, "lower").Set(slo.Finite(v.Lower))
	e.m.bound.WithLabelValues(r.name, service, "upper").Set(slo.Finite(v.Upper))

	a := r.baseAlert(alerts.NameThreshold, service, r.sloCfg.Severity)
	a.Value, a.Threshold, a.Window, a.N = slo.Finite(v.Value), r.th.Limit, r.sloCfg.Window, v.N
	side := "above"
	a.Comparator = ">"
	if r.th.Below {
		a.Comparator, side = "<", "below"
	}
	if !math.IsInf(v.Lower, 0) && !math.IsInf(v.Upper, 0) && !math.IsNaN(v.Lower) {
		a.Interval = &alerts.Interval{Lower: v.Lower, Upper: v.Upper, Level: 0.95}
	}
	a.Evidence = r.evidence(slo.MergeWorst(worst, r.th.Badness), service, e.traceTmpl)
	a.Summary = fmt.Sprintf("SLO %s: %s is %s for %s (alert %s %s)", r.name, r.metric,
		alerts.FormatValue(a.Value), service, side, alerts.FormatValue(r.th.Limit))
	obj := ""
	if r.sloCfg.Objective != 0 {
		obj = fmt.Sprintf(" (objective %s)", alerts.FormatValue(r.sloCfg.Objective))
	}
	when := "the whole interval is"
	if r.th.OnMean {
		when = "the mean is"
	}
	a.Description = fmt.Sprintf("The weighted mean of %s for service %s over the last %s is %s, 95%% interval %s from %d samples; it alerts when %s %s %s%s.",
		r.metric, service, a.Window, alerts.FormatValue(a.Value), a.IntervalText(), v.N, when, side, alerts.FormatValue(r.th.Limit), obj)
	return []evaluation{{severity: r.sloCfg.Severity, breach: v.Breach, recovered: v.Recovered, alert: a}}
}

func (r *rule) evalBurn(e *Engine, service string, in *instance, now time.Time) []evaluation {
	s := r.sloCfg
	obj := s.Objective
	period := r.windowSums(in, now, time.Duration(s.Period))
	budget := slo.BudgetRemaining(period, obj)
	e.m.budget.WithLabelValues(r.name, service).Set(budget)

	type best struct {
		v     slo.PairVerdict
		found bool
	}
	bySev := map[string]*best{}
	var sevs []string
	burnSeen := map[time.Duration]bool{}
	for i, p := range r.pairs {
		long := r.windowSums(in, now, p.LongWindow)
		short := r.windowSums(in, now, p.ShortWindow)
		pv := slo.EvaluatePair(p, long, short, obj, int64(s.MinSamples))
		if i == 0 {
			e.m.value.WithLabelValues(r.name, service).Set(1 - pv.LongErrorRatio)
		}
		for w, b := range map[time.Duration]float64{p.LongWindow: pv.LongBurn, p.ShortWindow: pv.ShortBurn} {
			if !burnSeen[w] {
				burnSeen[w] = true
				e.m.burn.WithLabelValues(r.name, service, model.Duration(w).String()).Set(b)
			}
		}
		cur, ok := bySev[p.Severity]
		if !ok {
			cur = &best{v: pv}
			bySev[p.Severity] = cur
			sevs = append(sevs, p.Severity)
		}
		// Report the breaching pair with the highest factor, else the pair closest to breaching.
		switch {
		case pv.Breach && (!cur.found || pv.Pair.Factor > cur.v.Pair.Factor):
			cur.v, cur.found = pv, true
		case !cur.found && pv.LongBurn/pv.Pair.Factor > cur.v.LongBurn/cur.v.Pair.Factor:
			cur.v = pv
		}
	}
	out := make([]evaluation, 0, len(sevs))
	for _, sev := range sevs {
		b := bySev[sev]
		pv := b.v
		a := r.baseAlert(alerts.NameBurnRate, service, sev)
		a.Value, a.Threshold, a.Comparator = pv.LongBurn, pv.Pair.Factor, ">"
		a.Window, a.N = model.Duration(pv.Pair.LongWindow), pv.LongN
		bud := budget
		a.BudgetRemaining = &bud
		evWindow := pv.Pair.ShortWindow
		if evWindow > r.fineS {
			evWindow = r.fineS
		}
		_, worst := r.fineSums(in, now, evWindow)
		a.Evidence = r.evidence(slo.MergeWorst(worst, r.good.Badness), service, e.traceTmpl)
		a.Summary = fmt.Sprintf("SLO %s: error budget burning %sx over %s for %s (alert above %sx)", r.name,
			alerts.FormatValue(pv.LongBurn), model.Duration(pv.Pair.LongWindow), service, alerts.FormatValue(pv.Pair.Factor))
		a.Description = fmt.Sprintf("%s of service %s is good when %s %s; objective %s over %s. Bad ratio %s over %s (burn %sx, %d samples) and %s over %s (burn %sx, %d samples); %s of the error budget remains.",
			r.metric, service, r.good.Op, alerts.FormatValue(r.good.Value), alerts.FormatValue(obj), s.Period,
			alerts.FormatValue(pv.LongErrorRatio), model.Duration(pv.Pair.LongWindow), alerts.FormatValue(pv.LongBurn), pv.LongN,
			alerts.FormatValue(pv.ShortErrorRatio), model.Duration(pv.Pair.ShortWindow), alerts.FormatValue(pv.ShortBurn), pv.ShortN,
			alerts.FormatValue(budget))
		out = append(out, evaluation{severity: sev, breach: b.found, recovered: !b.found, alert: a})
	}
	return out
}

func (r *rule) evalDrift(e *Engine, service string, in *instance, now time.Time) []evaluation {
	if m := in.Machines[r.det.Severity]; m != nil && m.Firing() && now.Sub(m.FiringSince) > r.refWindow {
		// A shift that lasted a whole reference window is the new normal: let it in.
		for i := range in.Drift.Slots {
			in.Drift.Slots[i].V.Anomalous = false
		}
	}
	cur := drift.NewHist(len(r.edges) + 1)
	var exBuckets [][]slo.Sample
	in.Drift.Window(now, r.driftWindow, func(b *driftBucket) {
		cur.Merge(b.H)
		exBuckets = append(exBuckets, b.Ex)
	})
	ref, pinned := e.baseline.Reference(r.detector, service)
	refText := "the pinned baseline"
	if !pinned {
		ref = drift.NewHist(len(r.edges) + 1)
		hi := in.Drift.Index(now) - in.Drift.Buckets(r.driftWindow)
		in.Drift.Range(hi-in.Drift.Buckets(r.refWindow)+1, hi, func(b *driftBucket) {
			if !b.Anomalous {
				ref.Merge(b.H)
			}
		})
		refText = "the trailing " + model.Duration(r.refWindow).String()
	}
	enough := cur.N >= int64(r.det.MinSamples) && ref.N >= int64(r.det.MinReferenceSamples)
	score := 0.0
	if enough {
		score = drift.Score(r.detector.Method, cur, ref)
		e.m.drift.WithLabelValues(r.name, service).Set(score)
	}
	a := r.baseAlert(alerts.NameDrift, service, r.det.Severity)
	a.Value, a.Threshold, a.Comparator, a.Window, a.N = score, r.det.Threshold, ">", model.Duration(r.driftWindow), cur.N
	if bin := drift.MostOverRepresented(cur, ref); enough && bin >= 0 {
		var samples []slo.Sample
		for i := len(exBuckets) - 1; i >= 0 && len(samples) < slo.MaxEvidence; i-- {
			if ex := exBuckets[i]; bin < len(ex) && ex[bin].TraceID != "" {
				samples = append(samples, ex[bin])
			}
		}
		a.Evidence = r.evidence(samples, service, e.traceTmpl)
	}
	method := strings.ToUpper(r.det.Method)
	a.Summary = fmt.Sprintf("Drift in %s for %s: %s %s > %s", r.metric, service, method,
		alerts.FormatValue(score), alerts.FormatValue(r.det.Threshold))
	a.Description = fmt.Sprintf("The distribution of %s for service %s over the last %s (%d samples) moved away from %s (%d samples): %s = %s, alert above %s.",
		r.metric, service, a.Window, cur.N, refText, ref.N, method, alerts.FormatValue(score), alerts.FormatValue(r.det.Threshold))
	breach := enough && score > r.det.Threshold
	if breach && !pinned {
		in.Drift.Window(now, r.driftWindow, func(b *driftBucket) { b.Anomalous = true })
	}
	recovered := cur.N == 0 || (enough && score < 0.8*r.det.Threshold)
	return []evaluation{{severity: r.det.Severity, breach: breach, recovered: recovered, alert: a}}
}

// sanitize clears restored buckets that do not fit the current bins, and nil entries, so a
// hand-edited or older state cannot make evaluation index out of range.
func (r *rule) sanitize(in *instance) {
	if in.Drift != nil {
		for i := range in.Drift.Slots {
			if v := &in.Drift.Slots[i].V; len(v.H.Counts) != len(r.edges)+1 || (v.Ex != nil && len(v.Ex) != len(r.edges)+1) {
				in.Drift.Slots[i] = ring.Slot[driftBucket]{}
			}
		}
	}
	for k, m := range in.Machines {
		if m == nil {
			delete(in.Machines, k)
		}
	}
	for k, a := range in.Last {
		if a == nil {
			delete(in.Last, k)
		}
	}
}

// stripOldExemplars drops drift evidence outside the current window before persisting.
func (r *rule) stripOldExemplars(in *instance, now time.Time) {
	if in.Drift == nil {
		return
	}
	lo := in.Drift.Index(now) - in.Drift.Buckets(r.driftWindow) + 1
	for i := range in.Drift.Slots {
		if in.Drift.Slots[i].Idx < lo {
			in.Drift.Slots[i].V.Ex = nil
		}
	}
}
