// Package bench measures detection on simulated streams (`ragwatch bench detect`): the delay
// after a shift of the mean and the false alarms of stationary traffic, for the windowed
// threshold rule the quality SLOs used before (window 15m, for 2m, alert below 0.70 on the 95 %
// bound) and for the change detector, beside Lorden's ln(γ)/D floor (docs/alerts.md).
package bench

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/ragwatch/ragwatch/alerts/changepoint"
	"github.com/ragwatch/ragwatch/alerts/slo"
)

// Options choose what to simulate.
type Options struct {
	Rates   []float64 // scored samples per second
	Shifts  [][2]float64
	Kinds   []Kind
	Warmups int // independent warm-ups per scenario
	Trials  int // changes per warm-up
	// MaxSamples bounds each stationary false-alarm run (the simulated days are fewer at high
	// rates); the rate is scaled to 30 days.
	MaxSamples int
	// Cycle is the amplitude of the daily cycle of the false-alarm runs "with cycle".
	Cycle    float64
	Detector changepoint.Settings
	Seed     uint64
	Workers  int
}

// Default is the benchmark of docs/alerts.md.
func Default() Options {
	return Options{Rates: []float64{0.1, 1, 10, 40}, Shifts: [][2]float64{{0.9, 0.8}, {0.9, 0.6}}, Kinds: []Kind{Binary, Scores},
		Warmups: 10, Trials: 20, MaxSamples: 5_000_000, Cycle: 0.05, Seed: 1, Workers: 2,
		Detector: changepoint.Settings{MinShift: 0.1, FalseAlarmEvery: 30 * 24 * time.Hour, HalfLife: 3 * time.Hour, MinSamples: 30}}
}

// Kind is how one sample is drawn around a mean.
type Kind int

const (
	// Binary samples are 0 or 1 (a good/bad outcome).
	Binary Kind = iota
	// Scores are Beta-distributed in [0,1] with a standard deviation of 0.2.
	Scores
)

func (k Kind) String() string {
	if k == Binary {
		return "0/1 outcomes"
	}
	return "scores, sd 0.2"
}

const scoreSD = 0.2

// betaParams are the Beta parameters of mean m and standard deviation scoreSD.
func betaParams(m float64) (a, b float64) {
	nu := m*(1-m)/(scoreSD*scoreSD) - 1
	return m * nu, (1 - m) * nu
}

func (k Kind) draw(r *rand.Rand, m float64) float64 {
	if k == Binary {
		if r.Float64() < m {
			return 1
		}
		return 0
	}
	a, b := betaParams(m)
	x, y := gamma(r, a), gamma(r, b)
	if x+y == 0 {
		return m
	}
	return x / (x + y)
}

// gamma draws Gamma(a, 1) (Marsaglia and Tsang; a < 1 boosted by U^(1/a)).
func gamma(r *rand.Rand, a float64) float64 {
	if a < 1 {
		return gamma(r, a+1) * math.Pow(r.Float64(), 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

// KL is the information per sample of the stream after a change from before to after (nats).
func (k Kind) KL(after, before float64) float64 {
	if k == Binary {
		return changepoint.BernoulliKL(after, before)
	}
	a2, b2 := betaParams(after)
	a1, b1 := betaParams(before)
	return lbeta(a1, b1) - lbeta(a2, b2) + (a2-a1)*digamma(a2) + (b2-b1)*digamma(b2) + (a1-a2+b1-b2)*digamma(a2+b2)
}

func lbeta(a, b float64) float64 {
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	return la + lb - lab
}

// digamma by recurrence up to x ≥ 6 and the asymptotic series.
func digamma(x float64) float64 {
	r := 0.0
	for x < 6 {
		r -= 1 / x
		x++
	}
	f := 1 / (x * x)
	return r + math.Log(x) - 0.5/x - f*(1.0/12-f*(1.0/120-f*(1.0/252-f*(1.0/240-f/132))))
}

// The windowed rule the quality SLOs used before: the 95 % upper bound of the 15-minute mean
// below 0.70 with 30 samples, held 2 minutes, evaluated every 15 s.
const (
	winLen   = 15 * 60
	winFor   = 2 * time.Minute
	winEvery = 15
	winLimit = 0.70
)

// windowed is that rule on per-second buckets.
type windowed struct {
	b       [winLen]slo.Sums
	sec     int64 // the current second
	pending int64 // second the breach began, -1 when none
	firing  bool
}

func newWindowed() *windowed { return &windowed{pending: -1} }

func (w *windowed) clone() *windowed { c := *w; return &c }

// add records x at second sec, evaluating every winEvery seconds passed; it returns the second
// of the evaluation at which the rule started firing, -1 if none did.
func (w *windowed) add(sec int64, x float64) int64 {
	fired := int64(-1)
	for w.sec < sec {
		w.sec++
		w.b[w.sec%winLen] = slo.Sums{}
		if w.sec%winEvery == 0 && w.eval() && fired < 0 {
			fired = w.sec
		}
	}
	w.b[sec%winLen].Add(x, 1)
	return fired
}

func (w *windowed) eval() bool {
	var s slo.Sums
	for i := range w.b {
		s.Merge(w.b[i])
	}
	v := slo.Threshold{Below: true, Limit: winLimit, MinSamples: 30}.Evaluate(s)
	switch {
	case v.Breach && w.pending < 0:
		w.pending = w.sec
	case !v.Breach && !w.firing:
		w.pending = -1
	case v.Recovered:
		w.pending, w.firing = -1, false
	}
	if w.pending >= 0 && !w.firing && time.Duration(w.sec-w.pending)*time.Second >= winFor {
		w.firing = true
		return true
	}
	return false
}

// Delays are the detection delays of one scenario.
type Delays struct {
	Kind              Kind
	Before, After     float64
	Rate              float64
	Floor             time.Duration // ln(γ)/D samples, as time
	Windowed, Changes []time.Duration
	WindowedMissed    int
	ChangeMissed      int
	ChangeTimeError   time.Duration // mean |estimated − true change time|
}

// FalseAlarms are the alarms of one stationary run.
type FalseAlarms struct {
	Kind              Kind
	Rate              float64
	Cycle             float64
	Days              float64
	Windowed, Changes int
}

// Per30d scales a count to 30 days.
func (f FalseAlarms) Per30d(n int) float64 { return float64(n) * 30 / f.Days }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// warm and warmSamples are the stationary history before a change: 2 hours, and at least
// 3000 samples (8.3 hours at 0.1/s), so the reference is as a running deployment's.
const (
	warm        = 2 * time.Hour
	warmSamples = 3000
)

// windowedCap is when the windowed rule can no longer fire: its window holds only the new level.
const windowedCap = winLen*time.Second + winFor + 2*winEvery*time.Second

// changeCap bounds a detector trial.
const changeCap = 12 * time.Hour

func delays(o Options, k Kind, before, after, rate float64, seed uint64) Delays {
	r := rand.New(rand.NewPCG(seed, 1))
	step := float64(time.Second) / rate
	at := func(i int) time.Time { return t0.Add(time.Duration(float64(i) * step)) }
	sec := func(i int) int64 { return int64(float64(i) * step / float64(time.Second)) }
	s := o.Detector
	gammaSamples := rate * s.FalseAlarmEvery.Seconds()
	d := Delays{Kind: k, Before: before, After: after, Rate: rate,
		Floor: time.Duration(math.Log(gammaSamples) / k.KL(after, before) / rate * float64(time.Second))}
	nWarm := int(max(warm.Seconds()*rate, warmSamples)) // a slow series has a long history too
	var ctErr time.Duration
	for wu := 0; wu < o.Warmups; wu++ {
		det, win := changepoint.New(s), newWindowed()
		for i := 0; i < nWarm; i++ {
			x := k.draw(r, before)
			if det.Observe(s, at(i), x, 1) {
				det = changepoint.New(s) // a false alarm in the warm-up: the team starts again
			}
			win.add(sec(i), x)
		}
		change := at(nWarm)
		for tr := 0; tr < o.Trials; tr++ {
			dt, wt := det.Clone(), win.clone()
			var gotD, gotW bool
			for j := nWarm; ; j++ {
				now := at(j)
				since := now.Sub(change)
				if since > changeCap || (gotD && (gotW || since > windowedCap)) {
					break
				}
				x := k.draw(r, after)
				if !gotD && dt.Observe(s, now, x, 1) {
					gotD = true
					d.Changes = append(d.Changes, since)
					ctErr += abs(dt.Alarm.ChangeTime.Sub(change))
				}
				if !gotW && since <= windowedCap {
					if tick := wt.add(sec(j), x); tick >= 0 {
						gotW = true
						d.Windowed = append(d.Windowed, at(0).Add(time.Duration(tick)*time.Second).Sub(change))
					}
				}
			}
			if !gotD {
				d.ChangeMissed++
			}
			if !gotW {
				d.WindowedMissed++
			}
		}
	}
	if len(d.Changes) > 0 {
		d.ChangeTimeError = ctErr / time.Duration(len(d.Changes))
	}
	return d
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func falseAlarms(o Options, k Kind, rate, cycle float64, seed uint64) FalseAlarms {
	r := rand.New(rand.NewPCG(seed, 2))
	s := o.Detector
	n := min(int(30*86400*rate), o.MaxSamples)
	step := float64(time.Second) / rate
	f := FalseAlarms{Kind: k, Rate: rate, Cycle: cycle, Days: float64(n) / rate / 86400}
	det, win := changepoint.New(s), newWindowed()
	for i := 0; i < n; i++ {
		t := float64(i) * step / float64(time.Second)
		m := 0.9 + cycle*math.Sin(2*math.Pi*t/86400)
		x := k.draw(r, m)
		if det.Observe(s, t0.Add(time.Duration(float64(i)*step)), x, 1) {
			f.Changes++
			det = changepoint.New(s)
		}
		if win.add(int64(t), x) >= 0 {
			f.Windowed++
		}
	}
	return f
}

// Result is the whole benchmark.
type Result struct {
	Delays      []Delays
	FalseAlarms []FalseAlarms
}

// Run simulates every scenario, Workers at a time; the seed fixes every stream.
func Run(o Options) Result {
	var res Result
	var mu sync.Mutex
	jobs := make(chan func())
	var wg sync.WaitGroup
	for w := 0; w < max(o.Workers, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j()
			}
		}()
	}
	seed := o.Seed
	for _, k := range o.Kinds {
		for _, sh := range o.Shifts {
			for _, rate := range o.Rates {
				seed++
				k, sh, rate, sd := k, sh, rate, seed
				jobs <- func() {
					d := delays(o, k, sh[0], sh[1], rate, sd)
					mu.Lock()
					res.Delays = append(res.Delays, d)
					mu.Unlock()
				}
			}
		}
		for _, rate := range o.Rates {
			for _, cyc := range []float64{0, o.Cycle} {
				seed++
				k, rate, cyc, sd := k, rate, cyc, seed
				jobs <- func() {
					f := falseAlarms(o, k, rate, cyc, sd)
					mu.Lock()
					res.FalseAlarms = append(res.FalseAlarms, f)
					mu.Unlock()
				}
			}
		}
	}
	close(jobs)
	wg.Wait()
	slices.SortFunc(res.Delays, func(a, b Delays) int {
		return cmpAll(int(a.Kind)-int(b.Kind), cmpF(b.After, a.After), cmpF(a.Rate, b.Rate))
	})
	slices.SortFunc(res.FalseAlarms, func(a, b FalseAlarms) int {
		return cmpAll(int(a.Kind)-int(b.Kind), cmpF(a.Rate, b.Rate), cmpF(a.Cycle, b.Cycle))
	})
	return res
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpAll(cs ...int) int {
	for _, c := range cs {
		if c != 0 {
			return c
		}
	}
	return 0
}

// Mean and P95 of delays (0 when none).
func Mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t / time.Duration(len(ds))
}

// P95 is the 95th percentile (nearest rank).
func P95(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(math.Ceil(0.95*float64(len(s))))-1]
}

func short(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%.1fh", d.Hours())
	case d >= time.Minute:
		return fmt.Sprintf("%.1fm", d.Minutes())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func delayCell(ds []time.Duration, missed int) (mean, p95 string) {
	if len(ds) == 0 {
		return "never", "never"
	}
	mean, p95 = short(Mean(ds)), short(P95(ds))
	if missed > 0 {
		p95 += fmt.Sprintf(" (%d missed)", missed)
	}
	return
}

// Markdown writes the two tables of docs/alerts.md.
func (r Result) Markdown(w io.Writer, o Options) {
	fmt.Fprintf(w, "Delay after the change (%d trials each; detector at sample resolution, the engine adds up to one evaluation interval):\n\n", o.Warmups*o.Trials)
	fmt.Fprintln(w, "| stream | change | scored/s | floor ln(γ)/D | windowed mean | windowed p95 | detector mean | detector p95 | detector / floor | change-time error |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, d := range r.Delays {
		wm, wp := delayCell(d.Windowed, d.WindowedMissed)
		dm, dp := delayCell(d.Changes, d.ChangeMissed)
		ratio := "–"
		if len(d.Changes) > 0 {
			ratio = fmt.Sprintf("%.2f", float64(Mean(d.Changes))/float64(d.Floor))
		}
		fmt.Fprintf(w, "| %s | %.2f→%.2f | %g | %s | %s | %s | %s | %s | %s | %s |\n", d.Kind, d.Before, d.After, d.Rate,
			short(d.Floor), wm, wp, dm, dp, ratio, short(d.ChangeTimeError))
	}
	fmt.Fprintf(w, "\nFalse alarms per 30 days of stationary traffic at 0.90 (daily cycle: ±%.2f):\n\n", o.Cycle)
	fmt.Fprintln(w, "| stream | scored/s | daily cycle | simulated days | windowed | detector |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, f := range r.FalseAlarms {
		cyc := "no"
		if f.Cycle > 0 {
			cyc = "yes"
		}
		fmt.Fprintf(w, "| %s | %g | %s | %.1f | %.1f (%d) | %.1f (%d) |\n", f.Kind, f.Rate, cyc, f.Days,
			f.Per30d(f.Windowed), f.Windowed, f.Per30d(f.Changes), f.Changes)
	}
}
