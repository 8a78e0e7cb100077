package decide

import (
	"encoding/hex"
	"hash/fnv"
	"math"
)

// MaxThreshold is 2^56: the randomness of a trace id is its last 56 bits (W3C Trace Context
// level 2), so R lies in [0, 2^56).
const MaxThreshold = uint64(1) << 56

// Threshold returns the rejection threshold of probability p, as in OpenTelemetry's
// consistent-probability samplers: T = 2^56 - round(p * 2^56), so that a record is sampled when
// R >= T. p <= 0 gives 2^56 (never), p >= 1 gives 0 (always). T falls as p rises, so a trace
// sampled at p is sampled at every p' > p.
func Threshold(p float64) uint64 {
	switch {
	case !(p > 0): // also NaN
		return MaxThreshold
	case p >= 1:
		return 0
	}
	return MaxThreshold - uint64(math.Round(p*float64(MaxThreshold)))
}

// Randomness returns the 56 random bits R of a trace id: the last 14 hex digits of a 32-digit
// (W3C / OTLP) trace id. Ids of another form (records posted with free-form trace ids) are
// hashed with 64-bit FNV-1a and the low 56 bits are used, which is just as consistent across
// replicas.
func Randomness(traceID string) uint64 {
	if len(traceID) == 32 {
		var b [7]byte
		if _, err := hex.Decode(b[:], []byte(traceID[18:])); err == nil {
			var r uint64
			for _, c := range b {
				r = r<<8 | uint64(c)
			}
			return r
		}
	}
	h := fnv.New64a()
	h.Write([]byte(traceID))
	return h.Sum64() & (MaxThreshold - 1)
}

// Sampled reports whether the trace is sampled at probability p: Randomness(traceID) >=
// Threshold(p). Every replica and every run gives the same answer for the same id.
func Sampled(traceID string, p float64) bool {
	switch {
	case !(p > 0):
		return false // T = 2^56 > R for every id
	case p >= 1:
		return true // T = 0
	}
	return Randomness(traceID) >= Threshold(p)
}

// sampledBytes is Sampled for the OTLP trace id whose hex form is the record's TraceID: its
// randomness is its last seven bytes, as Randomness reads from the last 14 hex digits.
func sampledBytes(id [16]byte, p float64) bool {
	switch {
	case !(p > 0):
		return false
	case p >= 1:
		return true
	}
	var r uint64
	for _, c := range id[9:] {
		r = r<<8 | uint64(c)
	}
	return r >= Threshold(p)
}
