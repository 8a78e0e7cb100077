package changepoint

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func settings(gamma time.Duration) Settings {
	return Settings{MinShift: 0.1, FalseAlarmEvery: gamma, HalfLife: time.Hour, MinSamples: 30}
}

// bern draws a 0/1 value with mean m.
func bern(r *rand.Rand, m float64) float64 {
	if r.Float64() < m {
		return 1
	}
	return 0
}

// runLengths feeds a stationary stream (one sample a second, value draw(i)) and counts the
// alarms, starting a fresh detector after each one, as a paged team would after a false page.
func runLengths(s Settings, n int, draw func(i int) (x, w float64)) int {
	st := New(s)
	alarms := 0
	for i := 0; i < n; i++ {
		x, w := draw(i)
		if st.Observe(s, t0.Add(time.Duration(i)*time.Second), x, w) {
			alarms++
			st = New(s)
		}
	}
	return alarms
}

// TestFalseAlarmRate: with γ set to 2000 samples (one a second, γ = 2000 s), a stationary
// stream of 400 000 samples may give at most 200 alarms; Lorden's bound makes it far fewer.
// The same holds for 0/1 values, values spread in [0,1], and unequal weights 1/p.
func TestFalseAlarmRate(t *testing.T) {
	s := settings(2000 * time.Second)
	const n = 400_000
	cases := map[string]func(r *rand.Rand) func(int) (float64, float64){
		"0/1 at 0.90": func(r *rand.Rand) func(int) (float64, float64) {
			return func(int) (float64, float64) { return bern(r, 0.9), 1 }
		},
		"uniform in [0.6, 1]": func(r *rand.Rand) func(int) (float64, float64) {
			return func(int) (float64, float64) { return 0.6 + 0.4*r.Float64(), 1 }
		},
		"0/1, weights 1 and 10": func(r *rand.Rand) func(int) (float64, float64) {
			return func(int) (float64, float64) {
				w := 1.0
				if r.IntN(2) == 0 {
					w = 10
				}
				return bern(r, 0.9), w
			}
		},
	}
	for name, mk := range cases {
		alarms := runLengths(s, n, mk(rand.New(rand.NewPCG(1, 2))))
		t.Logf("%s: %d false alarms in %d samples (budget %d)", name, alarms, n, n/2000)
		if alarms > n/2000 {
			t.Errorf("%s: %d false alarms, more than one per 2000 samples", name, alarms)
		}
	}
}

// delays runs trials of a change from before to after (0/1 values, rate samples/s, a
// reference of warm samples first) and returns the mean delay in samples after the change,
// and the change-time errors.
func delays(s Settings, rate float64, before, after float64, warm, trials int, seed uint64) (mean float64, meanCT time.Duration, missed int) {
	r := rand.New(rand.NewPCG(seed, 7))
	step := time.Duration(float64(time.Second) / rate)
	total := 0
	for k := 0; k < trials; k++ {
		st := New(s)
		i := 0
		for ; i < warm; i++ {
			if st.Observe(s, t0.Add(time.Duration(i)*step), bern(r, before), 1) {
				st = New(s) // a false alarm before the change: start again
			}
		}
		change := t0.Add(time.Duration(warm) * step)
		for j := 1; ; j++ {
			if j > 100_000 {
				missed++
				break
			}
			at := t0.Add(time.Duration(i+j-1) * step)
			if st.Observe(s, at, bern(r, after), 1) {
				total += j
				meanCT += absDur(st.Alarm.ChangeTime.Sub(change)) / time.Duration(trials)
				break
			}
		}
	}
	return float64(total) / float64(trials), meanCT, missed
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// TestDelayNearTheFloor: at one false alarm per 30 days, a 0/1 stream at 40 samples/s falling
// from 0.95 to 0.55 good, and one at 1 sample/s falling from 0.90 to 0.60, are detected in at
// most 1.3× Lorden's floor ln(γ)/D samples on average (the goal), and the change time is estimated within
// a few samples on average.
func TestDelayNearTheFloor(t *testing.T) {
	s := settings(30 * 24 * time.Hour)
	for _, c := range []struct {
		rate, before, after float64
		ctWithin            time.Duration
	}{
		{40, 0.95, 0.55, 2 * time.Second},
		{1, 0.90, 0.60, 20 * time.Second},
	} {
		floor := math.Log(c.rate*s.FalseAlarmEvery.Seconds()) / BernoulliKL(c.after, c.before)
		mean, ct, missed := delays(s, c.rate, c.before, c.after, 2000, 200, 3)
		t.Logf("%g/s %.2f→%.2f: mean delay %.1f samples, floor %.1f (%.2f×), mean change-time error %v",
			c.rate, c.before, c.after, mean, floor, mean/floor, ct)
		if missed > 0 || mean > 1.3*floor || ct > c.ctWithin {
			t.Errorf("%g/s: mean %.1f (floor %.1f), change time off by %v, missed %d", c.rate, mean, floor, ct, missed)
		}
	}
}

// TestRecoveryAndRestart: a drop alarms, the alarm survives a JSON round trip (a restart) with
// its levels, holds while the level stays low, and clears once the level is back; a state
// whose bank no longer fits the settings is reported incompatible.
func TestRecoveryAndRestart(t *testing.T) {
	s := settings(30 * 24 * time.Hour)
	r := rand.New(rand.NewPCG(5, 5))
	st := New(s)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 100 * time.Millisecond) } // 10/s
	i := 0
	for ; i < 6000; i++ {
		if st.Observe(s, at(i), bern(r, 0.9), 1) {
			t.Fatalf("false alarm at sample %d", i)
		}
	}
	change := at(i)
	for ; st.Alarm == nil; i++ {
		st.Observe(s, at(i), bern(r, 0.5), 1)
	}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(data, &back); err != nil || !back.Compatible(s) || !reflect.DeepEqual(back.Alarm, st.Alarm) {
		t.Fatalf("restored state differs: %v %+v", err, back.Alarm)
	}
	st = &back
	a := st.Alarm
	if d := a.ChangeTime.Sub(change); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("change time %v, true %v", a.ChangeTime, change)
	}
	if b := a.Before.Mean(); math.Abs(b-0.9) > 0.02 {
		t.Errorf("level before %v, want ≈0.90", b)
	}
	for j := 0; j < 600; j++ {
		st.Observe(s, at(i), bern(r, 0.5), 1)
		i++
	}
	if st.Alarm == nil || math.Abs(st.Alarm.After.Mean()-0.5) > 0.06 {
		t.Fatalf("the alarm must hold while the level stays at 0.5: %+v", st.Alarm)
	}
	for j := 0; j < 3000 && st.Alarm != nil; j++ {
		st.Observe(s, at(i), bern(r, 0.9), 1)
		i++
	}
	if st.Alarm != nil {
		t.Fatalf("the alarm must clear once the level is back at 0.90")
	}
	if st.Compatible(Settings{MinShift: 0.05, FalseAlarmEvery: time.Hour, HalfLife: time.Hour, MinSamples: 30}) {
		t.Fatal("a bank for another min_shift must not be compatible")
	}
	// No data for a half-life clears an alarm.
	st.Alarm = &Alarm{}
	if !st.Idle(s, st.Last.Add(s.HalfLife)) || st.Alarm != nil {
		t.Fatal("an idle series must clear its alarm")
	}
}

// TestDailyCycle: a 0/1 stream at 1 sample/s whose good share swings ±0.03 around 0.90 over a
// day gives no alarm in 10 days at one false alarm per 30 days; the reference follows it.
func TestDailyCycle(t *testing.T) {
	s := settings(30 * 24 * time.Hour)
	r := rand.New(rand.NewPCG(9, 9))
	st := New(s)
	const n = 10 * 24 * 3600
	alarms := 0
	for i := 0; i < n; i += 2 { // one sample every 2 s: 0.5/s
		m := 0.9 + 0.03*math.Sin(2*math.Pi*float64(i)/86400)
		if st.Observe(s, t0.Add(time.Duration(i)*time.Second), bern(r, m), 1) {
			alarms++
			st = New(s)
		}
	}
	if alarms > 0 {
		t.Fatalf("%d false alarms in 10 days of a daily cycle", alarms)
	}
}

// BenchmarkObserve is the cost of one sample on the scoring path (0/1 and continuous values).
func BenchmarkObserve(b *testing.B) {
	s := settings(30 * 24 * time.Hour)
	for _, c := range []struct {
		name string
		x    func(i int) float64
	}{{"binary", func(i int) float64 { return float64(i % 10 / 9) }}, {"continuous", func(i int) float64 { return 0.8 + 0.001*float64(i%100) }}} {
		b.Run(c.name, func(b *testing.B) {
			st := New(s)
			for i := 0; b.Loop(); i++ {
				st.Observe(s, t0.Add(time.Duration(i)*25*time.Millisecond), c.x(i), 1)
			}
		})
	}
}
