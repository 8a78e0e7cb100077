package engine

import (
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/reqsignal"
)

// The per-request signals an SLO or drift detector can watch besides eval metrics are the
// catalog's (reqsignal.All): their values come from reqsignal.Measure, the function the
// metrics (collector/signals) record too, so an SLO and the histogram above it agree.

// eachSignal calls fn with every signal m has a value for among the catalog's IDs [from, to).
func eachSignal(m *reqsignal.Measurement, from, to reqsignal.ID, fn func(sig *reqsignal.Signal, v float64)) {
	for id := from; id < to; id++ {
		sig := &reqsignal.All[id]
		if v, ok := sig.Value(m); ok {
			fn(sig, v)
		}
	}
}

// EachSignal calls fn with every signal value a record carries: its request signals and the
// signals of the feedback it carries inline.
func EachSignal(r *record.Record, fn func(name string, v float64)) {
	m := reqsignal.Measure(r)
	eachSignal(&m, 0, reqsignal.Num, func(sig *reqsignal.Signal, v float64) { fn(sig.Name, v) })
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
