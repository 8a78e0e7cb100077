package drift

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/ragwatch/ragwatch/internal/reqsignal"
)

// Epsilon is added to every bin share before PSI and JS so that an empty bin on one side gives
// a large but finite score.
const Epsilon = 1e-4

// Methods: how a detector scores the distance between two histograms.
const (
	MethodPSI = "psi"
	MethodKS  = "ks"
	MethodJS  = "js"
)

// Detector is what the histograms and baselines need of one drift detector. Callers build it
// from their config; the alert levels and timing stay with the caller.
type Detector struct {
	Name    string
	Signal  string
	Service string    // only this service; "" = every service
	Method  string    // MethodPSI, MethodKS or MethodJS
	Buckets []float64 // bin edges; empty = DefaultEdges(Signal)
}

// Edges returns the detector's bin edges: its own, else the default of its signal.
func (d Detector) Edges() []float64 {
	if len(d.Buckets) > 0 {
		return d.Buckets
	}
	return DefaultEdges(d.Signal)
}

// DefaultEdges are the bins used when a detector sets none: the signal catalog's for a signal
// (reqsignal.Signal.DriftEdges), else 0 to 1 by 0.05 (scores).
func DefaultEdges(signal string) []float64 {
	if s, ok := reqsignal.ByName(signal); ok && s.DriftEdges != nil {
		return slices.Clone(s.DriftEdges)
	}
	out := make([]float64, 0, 21)
	for i := 0; i <= 20; i++ {
		out = append(out, float64(i)*0.05)
	}
	return out
}

// Bin returns x's bin among len(edges)+1: bin i holds edges[i-1] <= x < edges[i].
func Bin(edges []float64, x float64) int {
	return sort.Search(len(edges), func(i int) bool { return x < edges[i] })
}

// Hist is a weighted histogram over len(edges)+1 bins.
type Hist struct {
	Counts []float64 `json:"c"`
	N      int64     `json:"n"`
}

// NewHist returns an empty histogram with bins bins.
func NewHist(bins int) Hist { return Hist{Counts: make([]float64, bins)} }

// Merge adds o (same bins).
func (h *Hist) Merge(o Hist) {
	if len(h.Counts) < len(o.Counts) {
		h.Counts = append(h.Counts, make([]float64, len(o.Counts)-len(h.Counts))...)
	}
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.N += o.N
}

func shares(h Hist, eps float64) []float64 {
	var total float64
	for _, c := range h.Counts {
		total += c
	}
	out := make([]float64, len(h.Counts))
	var sum float64
	for i, c := range h.Counts {
		p := 0.0
		if total > 0 {
			p = c / total
		}
		out[i] = p + eps
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// PSI is Σ (p−q)·ln(p/q) over bins, p the current and q the reference shares (smoothed by
// Epsilon). 0.1–0.2 is a moderate shift, above 0.2 a significant one.
func PSI(cur, ref Hist) float64 {
	p, q := shares(cur, Epsilon), shares(ref, Epsilon)
	var s float64
	for i := range p {
		s += (p[i] - q[i]) * math.Log(p[i]/q[i])
	}
	return s
}

// KS is the largest gap between the two cumulative distributions, evaluated at the bin edges
// (the binned two-sample Kolmogorov–Smirnov statistic).
func KS(cur, ref Hist) float64 {
	p, q := shares(cur, 0), shares(ref, 0)
	var cp, cq, d float64
	for i := range p {
		cp += p[i]
		cq += q[i]
		d = max(d, math.Abs(cp-cq))
	}
	return d
}

// JS is the Jensen–Shannon divergence in bits (0 = same, 1 = disjoint).
func JS(cur, ref Hist) float64 {
	p, q := shares(cur, 0), shares(ref, 0)
	var s float64
	for i := range p {
		m := (p[i] + q[i]) / 2
		if p[i] > 0 {
			s += 0.5 * p[i] * math.Log2(p[i]/m)
		}
		if q[i] > 0 {
			s += 0.5 * q[i] * math.Log2(q[i]/m)
		}
	}
	return max(s, 0)
}

// Score computes method's score.
func Score(method string, cur, ref Hist) float64 {
	switch method {
	case MethodKS:
		return KS(cur, ref)
	case MethodJS:
		return JS(cur, ref)
	}
	return PSI(cur, ref)
}

// MostOverRepresented is the bin whose share grew the most from ref to cur (-1 when none grew),
// where the evidence for a drift alert is taken from.
func MostOverRepresented(cur, ref Hist) int {
	p, q := shares(cur, 0), shares(ref, 0)
	best, bi := 0.0, -1
	for i := range p {
		if d := p[i] - q[i]; d > best {
			best, bi = d, i
		}
	}
	return bi
}

// Baseline is a pinned reference snapshot written by `ragwatch baseline`: per detector and
// service, the histogram of the reference traffic. The service "*" holds all services merged
// and is the fallback for a service without its own.
type Baseline struct {
	Version   int                         `json:"version"`
	CreatedAt time.Time                   `json:"created_at"`
	Source    string                      `json:"source"`
	Detectors map[string]BaselineDetector `json:"detectors"`
}

// BaselineDetector is one detector's reference.
type BaselineDetector struct {
	Signal   string          `json:"signal"`
	Edges    []float64       `json:"edges"`
	Services map[string]Hist `json:"services"`
}

// AllServices is the Baseline service key for all services merged.
const AllServices = "*"

// Reference returns the pinned histogram for a detector and service, checking its bins still
// match the detector's.
func (b *Baseline) Reference(d Detector, service string) (Hist, bool) {
	if b == nil {
		return Hist{}, false
	}
	bd, ok := b.Detectors[d.Name]
	if !ok || bd.Signal != d.Signal || !slices.Equal(bd.Edges, d.Edges()) {
		return Hist{}, false
	}
	if h, ok := bd.Services[service]; ok {
		return h, true
	}
	h, ok := bd.Services[AllServices]
	return h, ok
}

// Builder accumulates a baseline from values.
type Builder struct {
	dets []Detector
	b    Baseline
}

// NewBuilder starts a baseline for the detectors.
func NewBuilder(dets []Detector, source string, now time.Time) *Builder {
	bl := &Builder{dets: dets, b: Baseline{Version: 1, CreatedAt: now.UTC(), Source: source, Detectors: map[string]BaselineDetector{}}}
	for _, d := range dets {
		bl.b.Detectors[d.Name] = BaselineDetector{Signal: d.Signal, Edges: d.Edges(), Services: map[string]Hist{}}
	}
	return bl
}

// Add records value x of signal for service.
func (bl *Builder) Add(signal, service string, x, w float64) {
	for _, d := range bl.dets {
		if d.Signal != signal || (d.Service != "" && d.Service != service) {
			continue
		}
		bd := bl.b.Detectors[d.Name]
		bin := Bin(bd.Edges, x)
		for _, s := range []string{service, AllServices} {
			h, ok := bd.Services[s]
			if !ok {
				h = NewHist(len(bd.Edges) + 1)
			}
			h.Counts[bin] += w
			h.N++
			bd.Services[s] = h
		}
	}
}

// Baseline returns the snapshot.
func (bl *Builder) Baseline() *Baseline { return &bl.b }

// LoadBaseline reads a baseline file.
func LoadBaseline(path string) (*Baseline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read drift baseline: %w", err)
	}
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("drift baseline %s: %w", path, err)
	}
	if b.Version != 1 {
		return nil, fmt.Errorf("drift baseline %s: unsupported version %d", path, b.Version)
	}
	return &b, nil
}
