package bertscore

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// Greedy is BERTScore's greedy matching. cand and ref are the embeddings of the candidate's
// and the reference's tokens; wc and wr their weights (nil: every token weighs 1; a weight of
// 0 keeps a token matchable but out of its own side's average, as BERTScore does for [CLS]
// and [SEP]).
//
//	R = Σ_i wr_i · max_j cos(ref_i, cand_j) / Σ_i wr_i
//	P = Σ_j wc_j · max_i cos(ref_i, cand_j) / Σ_j wc_j
//	F = 2PR / (P + R)
func Greedy(cand, ref [][]float64, wc, wr []float64) (p, r, f float64, err error) {
	if len(cand) == 0 || len(ref) == 0 {
		return 0, 0, 0, errors.New("bertscore: no tokens to match")
	}
	if (wc != nil && len(wc) != len(cand)) || (wr != nil && len(wr) != len(ref)) {
		return 0, 0, 0, errors.New("bertscore: weights do not match the tokens")
	}
	cn, err := normalize(cand)
	if err != nil {
		return 0, 0, 0, err
	}
	rn, err := normalize(ref)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(cn[0]) != len(rn[0]) {
		return 0, 0, 0, fmt.Errorf("bertscore: embeddings of different sizes (%d, %d)", len(cn[0]), len(rn[0]))
	}
	bestC := make([]float64, len(cn)) // best match of each candidate token
	bestR := make([]float64, len(rn))
	for i := range bestC {
		bestC[i] = math.Inf(-1)
	}
	for i := range bestR {
		bestR[i] = math.Inf(-1)
	}
	for i, a := range rn {
		for j, b := range cn {
			s := dot(a, b)
			bestR[i] = math.Max(bestR[i], s)
			bestC[j] = math.Max(bestC[j], s)
		}
	}
	if p, err = weighted(bestC, wc); err != nil {
		return 0, 0, 0, err
	}
	if r, err = weighted(bestR, wr); err != nil {
		return 0, 0, 0, err
	}
	return p, r, F1(p, r), nil
}

// F1 is the harmonic mean of p and r (0 when both are 0).
func F1(p, r float64) float64 {
	if p+r == 0 {
		return 0
	}
	return 2 * p * r / (p + r)
}

// Rescale maps a score s with baseline b to (s − b) / (1 − b), BERTScore's rescaling with
// a model's baseline (b = 0 leaves s as it is).
func Rescale(s, b float64) float64 {
	if b == 0 {
		return s
	}
	return (s - b) / (1 - b)
}

func weighted(best, w []float64) (float64, error) {
	var num, den float64
	for i, v := range best {
		wi := 1.0
		if w != nil {
			wi = w[i]
		}
		num += wi * v
		den += wi
	}
	if den <= 0 {
		return 0, errors.New("bertscore: every token weighs 0")
	}
	return num / den, nil
}

func normalize(vs [][]float64) ([][]float64, error) {
	out := make([][]float64, len(vs))
	dim := len(vs[0])
	for i, v := range vs {
		if len(v) != dim || dim == 0 {
			return nil, fmt.Errorf("bertscore: embedding %d has %d values, want %d", i, len(v), dim)
		}
		n := math.Sqrt(dot(v, v))
		if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, fmt.Errorf("bertscore: embedding %d has no direction", i)
		}
		u := make([]float64, dim)
		for k, x := range v {
			u[k] = x / n
		}
		out[i] = u
	}
	return out, nil
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// IDF keeps the document frequency of token ids over the references seen, for BERTScore's
// weights idf(t) = ln((M + 1) / (df(t) + 1)), M the references counted (the bert_score
// package's smoothing). At most max ids are kept; later new ids count as never seen. Safe for
// concurrent use.
type IDF struct {
	mu  sync.Mutex
	max int
	m   int
	df  map[uint32]int
}

// NewIDF returns an empty table keeping at most max token ids.
func NewIDF(max int) *IDF { return &IDF{max: max, df: map[uint32]int{}} }

// Add counts one reference's tokens (each id once).
func (t *IDF) Add(ids []uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m++
	seen := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if _, ok := t.df[id]; ok || len(t.df) < t.max {
			t.df[id]++
		}
	}
}

// Weights returns each id's weight.
func (t *IDF) Weights(ids []uint32) []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]float64, len(ids))
	for i, id := range ids {
		out[i] = math.Log(float64(t.m+1) / float64(t.df[id]+1))
	}
	return out
}
