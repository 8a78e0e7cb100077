package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/prometheus/common/model"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/slo"
)

// evidenceSpan is how far back a change SLO keeps its worst samples (the evidence).
const evidenceSpan = 15 * time.Minute

// level is a slo.Sums as an alert's level: its mean, 95 % interval and samples.
func level(s slo.Sums) *alerts.Level {
	l := &alerts.Level{Value: slo.Finite(s.Mean()), N: s.N}
	if lo, hi := s.Interval(); !math.IsInf(lo, 0) && !math.IsInf(hi, 0) && !math.IsNaN(lo) {
		l.Interval = &alerts.Interval{Lower: lo, Upper: hi, Level: 0.95}
	}
	return l
}

// evalChange reads a change SLO's detector (alerts/changepoint): it breaches while a detected
// change holds and recovers once the detector saw the level come back (or no data for a
// reference half-life).
func (r *rule) evalChange(e *Engine, service string, in *instance, now time.Time) []evaluation {
	st := in.Change
	st.Idle(r.change, now)
	h := st.Threshold(r.change)
	a := r.baseAlert(alerts.NameThreshold, service, r.sloCfg.Severity)
	a.Kind = alerts.KindChange
	word, side := "dropped", "<"
	if r.change.Up {
		word, side = "rose", ">"
	}
	a.Comparator = side
	before := st.Ref
	detected := 0.0
	stat := st.MaxStatistic() / h
	if al := st.Alarm; al != nil {
		detected, stat = 1, al.Statistic/al.Threshold
		before = al.Before
		ct := al.ChangeTime
		a.ChangeTime = &ct
		a.LevelBefore, a.LevelAfter = level(al.Before), level(al.After)
		a.Value, a.N = a.LevelAfter.Value, al.After.N
		a.Interval = a.LevelAfter.Interval
		a.Window = model.Duration(max(now.Sub(ct), 0).Round(time.Second))
	} else {
		a.LevelBefore = level(st.Ref)
		a.Value, a.N, a.Interval = a.LevelBefore.Value, st.Ref.N, a.LevelBefore.Interval
		a.Window = model.Duration(r.change.HalfLife)
	}
	shift := r.change.MinShift
	if r.change.Up {
		a.Threshold = slo.Finite(before.Mean() + shift)
	} else {
		a.Threshold = slo.Finite(before.Mean() - shift)
	}
	e.m.value.WithLabelValues(r.name, service).Set(a.Value)
	if a.Interval != nil {
		e.m.bound.WithLabelValues(r.name, service, "lower").Set(a.Interval.Lower)
		e.m.bound.WithLabelValues(r.name, service, "upper").Set(a.Interval.Upper)
	}
	e.m.changeDetected.WithLabelValues(r.name, service).Set(detected)
	e.m.changeStatistic.WithLabelValues(r.name, service).Set(slo.Finite(stat))

	_, worst := r.fineSums(in, now, evidenceSpan)
	a.Evidence = r.evidence(slo.MergeWorst(worst, r.th.Badness), service, e.traceTmpl)
	every := model.Duration(r.change.FalseAlarmEvery).String()
	if a.ChangeTime != nil {
		a.Summary = fmt.Sprintf("SLO %s: %s %s from %s to %s for %s since %s", r.name, r.metric, word,
			alerts.FormatValue(a.LevelBefore.Value), alerts.FormatValue(a.LevelAfter.Value), service, a.ChangeTimeText())
		a.Description = fmt.Sprintf("Change detection on %s for service %s: the level %s from %s to %s around %s "+
			"(the change time is the detector's maximum-likelihood estimate). It alerts on a change of %s or more at one false alarm per %s per series; "+
			"the evidence reached %s against a threshold of %s.",
			r.metric, service, word, a.LevelBefore.Text(), a.LevelAfter.Text(), a.ChangeTimeText(),
			alerts.FormatValue(shift), every, alerts.FormatValue(st.Alarm.Statistic), alerts.FormatValue(st.Alarm.Threshold))
	} else {
		a.Summary = fmt.Sprintf("SLO %s: %s is %s for %s, no change detected", r.name, r.metric, alerts.FormatValue(a.Value), service)
		a.Description = fmt.Sprintf("Change detection on %s for service %s: the reference level is %s; no change of %s or more detected (one false alarm per %s per series).",
			r.metric, service, a.LevelBefore.Text(), alerts.FormatValue(shift), every)
	}
	return []evaluation{{severity: r.sloCfg.Severity, breach: st.Alarm != nil, recovered: st.Alarm == nil, alert: a}}
}
