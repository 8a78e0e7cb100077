package decide

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// refSampled is an independent reference in exact arithmetic: R = the trace id's last 56 bits
// as an integer, T = 2^56 - round(p·2^56); sampled iff R >= T.
func refSampled(traceID string, p float64) bool {
	r, ok := new(big.Int).SetString(traceID[18:], 16)
	if !ok {
		panic("bad id " + traceID)
	}
	two56 := new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), 56))
	scaled := new(big.Float).Mul(big.NewFloat(p), two56)
	scaled.Add(scaled, big.NewFloat(0.5)) // round half up; p·2^56 is never exactly .5 off for these p
	si, _ := scaled.Int(nil)
	t := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 56), si)
	return r.Cmp(t) >= 0
}

func TestThresholdFixedValues(t *testing.T) {
	tests := []struct {
		p    float64
		want uint64
	}{
		{0, 1 << 56},
		{-1, 1 << 56},
		{math.NaN(), 1 << 56},
		{1, 0},
		{2, 0},
		{0.5, 1 << 55},
		{0.25, 3 << 54},
		{0.1, 0xe6666666666666},  // 2^56 - round(0.1·2^56) = 2^56 - 0x1999999999999a
		{0.01, 0xfd70a3d70a3d71}, // 2^56 - 0x028f5c28f5c28f
	}
	for _, tt := range tests {
		if got := Threshold(tt.p); got != tt.want {
			t.Errorf("Threshold(%v) = %#x, want %#x", tt.p, got, tt.want)
		}
	}
}

func TestSampledFixedTraceIDs(t *testing.T) {
	tests := []struct {
		id   string
		p    float64
		want bool
	}{
		// R = 0x80000000000000 = 2^55 exactly: sampled from p = 0.5 up.
		{"0123456789abcdef0080000000000000", 0.5, true},
		{"0123456789abcdef0080000000000000", 0.4999, false},
		// R = 2^55 - 1: just below the 0.5 threshold.
		{"0123456789abcdef007fffffffffffff", 0.5, false},
		{"0123456789abcdef007fffffffffffff", 0.5000001, true},
		// The byte before the last 7 is ignored.
		{"0123456789abcdefff7fffffffffffff", 0.5, false},
		// R = 0: only p = 1 samples it; R = 2^56-1: every p > 0 samples it.
		{"4bf92f3577b34da6a300000000000000", 0.999999, false},
		{"4bf92f3577b34da6a300000000000000", 1, true},
		{"4bf92f3577b34da6a3ffffffffffffff", 1e-9, true},
		{"4bf92f3577b34da6a3ffffffffffffff", 0, false},
		// The W3C example trace id: R = 0xce929d0e0e4736.
		{"4bf92f3577b34da6a3ce929d0e0e4736", 0.2, true},   // T = 0xcccccccccccccd <= R
		{"4bf92f3577b34da6a3ce929d0e0e4736", 0.19, false}, // T = 0xcf5c28f5c28f5c > R
		// Upper-case hex is the same id.
		{"4BF92F3577B34DA6A3CE929D0E0E4736", 0.2, true},
	}
	for _, tt := range tests {
		if got := Sampled(tt.id, tt.p); got != tt.want {
			t.Errorf("Sampled(%s, %v) = %v, want %v (R=%#x T=%#x)", tt.id, tt.p, got, tt.want, Randomness(tt.id), Threshold(tt.p))
		}
	}
}

func TestSampledMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		id := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
		p := rng.Float64()
		if i%7 == 0 {
			p = float64(rng.IntN(101)) / 100
		}
		if got, want := Sampled(id, p), refSampled(id, p); got != want {
			t.Fatalf("Sampled(%s, %v) = %v, reference %v", id, p, got, want)
		}
	}
}

func TestSampledMonotoneInP(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ps := []float64{0, 1e-6, 0.001, 0.01, 0.05, 0.1, 0.2, 0.3333, 0.5, 0.75, 0.9, 0.999, 1}
	for i := 0; i < 5000; i++ {
		id := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
		if i%2 == 0 {
			id = fmt.Sprintf("free-form-%d", i) // hashed ids are monotone too
		}
		was := false
		for _, p := range ps {
			now := Sampled(id, p)
			if was && !now {
				t.Fatalf("%s sampled below p=%v but not at it", id, p)
			}
			was = now
		}
		if !was {
			t.Fatalf("%s not sampled at p=1", id)
		}
	}
}

func TestRealisedRate(t *testing.T) {
	const n = 100000
	rng := rand.New(rand.NewPCG(5, 6))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
	}
	for _, p := range []float64{0.01, 0.05, 0.1, 0.25, 0.5, 0.9} {
		k := 0
		for _, id := range ids {
			if Sampled(id, p) {
				k++
			}
		}
		got := float64(k) / n
		// Within 1 percentage point, and within 4 standard errors (stricter for every p here).
		se := math.Sqrt(p * (1 - p) / n)
		if d := math.Abs(got - p); d > 0.01 || d > 4*se {
			t.Errorf("p=%v: realised %v (diff %.5f, 4se %.5f)", p, got, d, 4*se)
		}
	}
}

func TestRandomnessFreeFormIDs(t *testing.T) {
	// Not 32 hex digits: hashed, stable, and within 56 bits.
	for _, id := range []string{"req-1", "0123456789abcdef0123456789abcdeg", ""} {
		r := Randomness(id)
		if r >= MaxThreshold || r != Randomness(id) {
			t.Errorf("Randomness(%q) = %#x", id, r)
		}
	}
	if Randomness("req-1") == Randomness("req-2") {
		t.Error("different ids hash to the same randomness")
	}
}
