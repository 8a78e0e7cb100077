package eval

import (
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/ragwatch/ragwatch/internal/agreement"
)

type judgeKey struct{ metric, judge string }

// AgreementRow is one judge's agreement with the human labels of the input on one metric:
// records that carried a label value for the metric and got a score from the judge.
type AgreementRow struct {
	Metric   string             `json:"metric"`
	Judge    string             `json:"judge"`
	N        int                `json:"n"`
	MAE      agreement.Estimate `json:"mae"`
	Spearman agreement.Estimate `json:"spearman"`
	Kappa    agreement.Estimate `json:"kappa"`
}

// addPairs records a line's (human, judge) pairs: every metric the record was labelled on and
// scored for.
func (r *Report) addPairs(l Line) {
	for m, h := range l.human {
		v, ok := l.Scores[m]
		if !ok || math.IsNaN(h) {
			continue
		}
		k := judgeKey{metric: m, judge: l.judges[m]}
		r.pairs[k] = append(r.pairs[k], agreement.Pair{Human: h, Judge: v})
	}
}

func agreementRows(pairs map[judgeKey][]agreement.Pair) []AgreementRow {
	out := make([]AgreementRow, 0, len(pairs))
	for k, p := range pairs {
		out = append(out, AgreementRow{Metric: k.metric, Judge: k.judge, N: len(p),
			MAE: agreement.MeanAbsError(p), Spearman: agreement.SpearmanRho(p), Kappa: agreement.CohenKappa(p)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Metric != out[j].Metric {
			return out[i].Metric < out[j].Metric
		}
		return out[i].Judge < out[j].Judge
	})
	return out
}

// WriteAgreement prints one row per metric and judge: pairs, MAE, Spearman and kappa (at 0.5)
// with their 95% intervals; "-" where a statistic is undefined (too few pairs, no variance).
// It prints nothing when the input carried no labels.
func (r *Report) WriteAgreement(w io.Writer) {
	if len(r.Agreement) == 0 {
		return
	}
	fmt.Fprintln(w, "agreement with human labels (95% intervals):")
	fmt.Fprintf(w, "%-22s %-10s %5s  %-24s %-24s %-24s\n", "metric", "judge", "n", "mae", "spearman", "kappa")
	for _, a := range r.Agreement {
		fmt.Fprintf(w, "%-22s %-10s %5d  %-24s %-24s %-24s\n", a.Metric, a.Judge, a.N, est(a.MAE), est(a.Spearman), est(a.Kappa))
	}
}

func est(e agreement.Estimate) string {
	if !e.OK {
		return "-"
	}
	return fmt.Sprintf("%.3f [%.3f, %.3f]", e.Value, e.Lower, e.Upper)
}
