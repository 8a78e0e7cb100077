package engine

// Judge versions. A judge's results carry the version of its definition
// (score.Result.JudgeVersion); a changed rubric must not be averaged with the old one. The
// engine keeps one window per rule and service, so when a metric's results arrive with a new
// version it empties the windows of every rule on that metric (alert state is kept, and
// resolves or fires again on the new version's results), and from then on drops results of
// the versions it has replaced (still in flight from before a reload), counting them in
// ragwatch_alert_inputs_rejected_total{reason="old_judge_version"}. The versions seen are not
// persisted: after a restart the first version seen is taken as current without a reset.

// judgeVersions is what the engine knows of one judge metric's versions.
type judgeVersions struct {
	current string
	retired map[string]bool
}

// admitJudgeVersion reports whether a result of metric with version v feeds the windows,
// resetting them when v is new. Called with e.mu held.
func (e *Engine) admitJudgeVersion(metric, v string) bool {
	if v == "" {
		return true
	}
	if e.judgeVersions == nil {
		e.judgeVersions = map[string]*judgeVersions{}
	}
	jv, ok := e.judgeVersions[metric]
	switch {
	case !ok:
		e.judgeVersions[metric] = &judgeVersions{current: v, retired: map[string]bool{}}
		return true
	case jv.current == v:
		return true
	case jv.retired[v]:
		e.m.rejected.WithLabelValues("old_judge_version").Inc()
		return false
	}
	jv.retired[jv.current] = true
	jv.current = v
	for _, r := range e.byMetric[metric] {
		for _, in := range r.instances {
			fresh := r.newInstance()
			in.Fine, in.Coarse, in.Drift = fresh.Fine, fresh.Coarse, fresh.Drift
		}
	}
	return true
}
