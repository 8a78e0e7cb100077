package trec

import (
	"fmt"
	"io"
	"math"
)

// Comparison is one measure of a candidate run against a baseline run over the queries both
// evaluated: the mean per-query difference (candidate − baseline) with its 95% interval, a
// paired t test and a sign test.
type Comparison struct {
	Metric   string  `json:"metric"`
	N        int     `json:"n"`         // queries paired
	Baseline float64 `json:"baseline"`  // baseline mean over the paired queries
	Mean     float64 `json:"candidate"` // candidate mean over the paired queries
	Diff     float64 `json:"diff"`      // mean of candidate − baseline
	Lo       float64 `json:"diff_ci95_low"`
	Hi       float64 `json:"diff_ci95_high"`
	TP       float64 `json:"t_test_p"` // two-sided paired t test; 1 when every difference is 0
	Wins     int     `json:"wins"`     // queries the candidate scores higher
	Losses   int     `json:"losses"`
	Ties     int     `json:"ties"`
	SignP    float64 `json:"sign_test_p"` // two-sided exact sign test over wins and losses
}

// Compare pairs cand with base query by query (queries evaluated in both) for every measure
// of cand. It fails when no query is shared or the runs were evaluated with other measures.
func Compare(base, cand *Result) ([]Comparison, error) {
	var shared []string
	for _, q := range cand.Queries {
		if _, ok := base.PerQuery[q]; ok {
			shared = append(shared, q)
		}
	}
	if len(shared) == 0 {
		return nil, fmt.Errorf("the baseline run and the run share no evaluated query")
	}
	out := make([]Comparison, 0, len(cand.Measures))
	for _, m := range cand.Measures {
		c := Comparison{Metric: m, N: len(shared)}
		d := make([]float64, len(shared))
		for i, q := range shared {
			b, ok := base.PerQuery[q][m]
			if !ok {
				return nil, fmt.Errorf("the baseline run has no %s", m)
			}
			v := cand.PerQuery[q][m]
			c.Baseline += b
			c.Mean += v
			d[i] = v - b
			// Differences below float noise are ties (0.1+0.2 vs 0.3 is not a win).
			switch {
			case d[i] > 1e-12:
				c.Wins++
			case d[i] < -1e-12:
				c.Losses++
			default:
				c.Ties++
			}
		}
		n := float64(len(shared))
		c.Baseline /= n
		c.Mean /= n
		c.Diff, c.Lo, c.Hi, c.TP = pairedT(d)
		c.SignP = signTest(c.Wins, c.Losses)
		out = append(out, c)
	}
	return out, nil
}

// pairedT returns the mean of d, its 95% Student t interval and the two-sided p of the t test
// of mean 0. With one difference the interval is the point and p is 1; with no spread p is 1
// for a zero mean and 0 otherwise.
func pairedT(d []float64) (mean, lo, hi, p float64) {
	n := float64(len(d))
	for _, x := range d {
		mean += x
	}
	mean /= n
	if len(d) < 2 {
		return mean, mean, mean, 1
	}
	ss := 0.0
	for _, x := range d {
		ss += (x - mean) * (x - mean)
	}
	se := math.Sqrt(ss/(n-1)) / math.Sqrt(n)
	df := n - 1
	if se < 1e-15 {
		if math.Abs(mean) < 1e-12 {
			return mean, mean, mean, 1
		}
		return mean, mean, mean, 0
	}
	half := StudentTQuantile(0.975, df) * se
	return mean, mean - half, mean + half, StudentTTwoSided(mean/se, df)
}

// StudentTTwoSided is P(|T| ≥ |t|) for Student's t with df degrees of freedom:
// I_{df/(df+t²)}(df/2, 1/2).
func StudentTTwoSided(t, df float64) float64 {
	return regIncBeta(df/2, 0.5, df/(df+t*t))
}

// StudentTQuantile is the p quantile (0.5 < p < 1) of Student's t with df degrees of freedom,
// found by bisection on StudentTTwoSided.
func StudentTQuantile(p, df float64) float64 {
	target := 2 * (1 - p)
	lo, hi := 0.0, 1e6
	for i := 0; i < 200 && hi-lo > 1e-12; i++ {
		mid := (lo + hi) / 2
		if StudentTTwoSided(mid, df) > target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// signTest is the two-sided exact binomial test of wins against losses with p = 1/2 (ties
// dropped): 2·P(X ≤ min(wins, losses)), at most 1.
func signTest(wins, losses int) float64 {
	n := wins + losses
	if n == 0 {
		return 1
	}
	k := min(wins, losses)
	sum := 0.0
	lgN, _ := math.Lgamma(float64(n + 1))
	for i := 0; i <= k; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lgN - a - b - float64(n)*math.Ln2)
	}
	return math.Min(1, 2*sum)
}

// regIncBeta is the regularized incomplete beta function I_x(a, b), by the continued fraction
// of Numerical Recipes (betacf) with the symmetry I_x(a,b) = 1 − I_{1−x}(b,a) for convergence.
func regIncBeta(a, b, x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log(1-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

func betaCF(a, b, x float64) float64 {
	const tiny = 1e-300
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, 1-qab*x/qap
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		m2 := 2 * fm
		aa := fm * (b - fm) * x / ((qam + m2) * (a + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		aa = -(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return h
}

// WriteComparison prints one row per measure: the two means, the difference with its
// interval, wins/losses/ties and both p values.
func WriteComparison(w io.Writer, cs []Comparison) {
	fmt.Fprintf(w, "%-14s %5s %8s %8s %8s %19s %13s %8s %8s\n", "measure", "n", "baseline", "run", "diff", "diff 95% CI", "win/loss/tie", "t p", "sign p")
	for _, c := range cs {
		fmt.Fprintf(w, "%-14s %5d %8.4f %8.4f %+8.4f  [%+.4f, %+.4f] %13s %8.4f %8.4f\n", c.Metric, c.N, c.Baseline, c.Mean, c.Diff, c.Lo, c.Hi,
			fmt.Sprintf("%d/%d/%d", c.Wins, c.Losses, c.Ties), c.TP, c.SignP)
	}
}

// WriteTable prints the means: one row per measure with the number of queries, the mean and
// its 95% interval.
func (r *Result) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%-14s %6s %7s %17s\n", "measure", "n", "mean", "95% CI")
	for _, s := range r.Means {
		fmt.Fprintf(w, "%-14s %6d %7.4f  [%.4f, %.4f]\n", s.Metric, s.N, s.Mean, s.Lo, s.Hi)
	}
}

// Line is one line of --output: trec_eval -q's triple, with query_id "all" for the means.
type Line struct {
	QueryID string  `json:"query_id"`
	Metric  string  `json:"metric"`
	Value   float64 `json:"value"`
}

// Lines returns every per-query value (queries sorted, measures in Measures order), then the
// means under query_id "all".
func (r *Result) Lines() []Line {
	out := make([]Line, 0, (len(r.Queries)+1)*len(r.Measures))
	for _, q := range r.Queries {
		for _, m := range r.Measures {
			out = append(out, Line{q, m, r.PerQuery[q][m]})
		}
	}
	for _, s := range r.Means {
		out = append(out, Line{"all", s.Metric, s.Mean})
	}
	return out
}
