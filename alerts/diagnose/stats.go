package diagnose

import (
	"math"

	"github.com/ragwatch/ragwatch/alerts/slo"
)

// Moments holds the weighted sums of two metrics measured on the same requests, enough for
// their weighted correlation.
type Moments struct {
	N   int64   `json:"n"`
	W   float64 `json:"w"`
	WX  float64 `json:"wx"`
	WY  float64 `json:"wy"`
	WXX float64 `json:"wxx"`
	WYY float64 `json:"wyy"`
	WXY float64 `json:"wxy"`
}

// Add adds one request's pair (x, y) of weight w.
func (m *Moments) Add(x, y, w float64) {
	m.N++
	m.W += w
	m.WX += w * x
	m.WY += w * y
	m.WXX += w * x * x
	m.WYY += w * y * y
	m.WXY += w * x * y
}

// Merge adds o's sums.
func (m *Moments) Merge(o Moments) {
	m.N += o.N
	m.W += o.W
	m.WX += o.WX
	m.WY += o.WY
	m.WXX += o.WXX
	m.WYY += o.WYY
	m.WXY += o.WXY
}

// Correlation is the weighted Pearson correlation, NaN when either metric is constant or
// there is no weight.
func (m Moments) Correlation() float64 {
	if m.W <= 0 {
		return math.NaN()
	}
	mx, my := m.WX/m.W, m.WY/m.W
	vx := m.WXX/m.W - mx*mx
	vy := m.WYY/m.W - my*my
	if vx <= 1e-12 || vy <= 1e-12 {
		return math.NaN()
	}
	c := (m.WXY/m.W - mx*my) / math.Sqrt(vx*vy)
	return max(-1, min(1, c))
}

// Window is what the engine accumulated for one service: every watched metric's weighted sums
// over the whole window and over its older and newer halves (for trends), and the pairs'
// joint moments over the whole window.
type Window struct {
	Means map[string]slo.Sums `json:"means,omitempty"` // the SLOs' weighted sums
	Older map[string]slo.Sums `json:"older,omitempty"`
	Newer map[string]slo.Sums `json:"newer,omitempty"`
	Pairs map[string]Moments  `json:"pairs,omitempty"` // keyed by PairKey
}

// PairKey names a pair of metrics in Window.Pairs.
func PairKey(a, b string) string { return a + "|" + b }
