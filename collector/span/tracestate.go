package span

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Upstream sampling declared in the W3C tracestate, OpenTelemetry's `ot` entry
// (https://opentelemetry.io/docs/specs/otel/trace/tracestate-probability-sampling/):
//
//   - th:<1 to 14 lowercase hex digits> is the rejection threshold T, trailing zeros omitted:
//     the trace was kept with probability p = 1 - T/2^56 (th:0 → 1, th:8 → 0.5, th:c → 0.25);
//   - p:<0 to 63> is the earlier experimental p-value: p = 2^-n (63 means probability zero).
//
// th wins when both are present.

// maxThresholdDigits is the length of a full 56-bit threshold in hex.
const maxThresholdDigits = 14

// errNoProbability says the `ot` entry declares a probability of zero (p:63, or a threshold
// that rejects everything): no weight can be derived from it.
var errNoProbability = errors.New("declares a sampling probability of zero")

// UpstreamProbability returns the sampling probability that tracestate's `ot` entry declares.
// found is false when it declares none (no `ot` entry, or one without th and p); err says why a
// declaration was malformed, and then found is true and p is 0.
func UpstreamProbability(tracestate string) (p float64, found bool, err error) {
	ot, ok := otEntry(tracestate)
	if !ok {
		return 0, false, nil
	}
	var th, pv string
	var hasTH, hasP bool
	for _, kv := range strings.Split(ot, ";") {
		k, v, _ := strings.Cut(kv, ":")
		switch k {
		case "th":
			th, hasTH = v, true
		case "p":
			pv, hasP = v, true
		}
	}
	switch {
	case hasTH:
		p, err = thresholdProbability(th)
	case hasP:
		p, err = pValueProbability(pv)
	default:
		return 0, false, nil
	}
	if err != nil {
		return 0, true, err
	}
	return p, true, nil
}

// otEntry returns the value of the `ot` list member of a W3C tracestate.
func otEntry(tracestate string) (string, bool) {
	for tracestate != "" {
		var member string
		member, tracestate, _ = strings.Cut(tracestate, ",")
		member = strings.Trim(member, " \t")
		if v, ok := strings.CutPrefix(member, "ot="); ok {
			return v, true
		}
	}
	return "", false
}

func thresholdProbability(th string) (float64, error) {
	if th == "" || len(th) > maxThresholdDigits {
		return 0, fmt.Errorf("ot th %q: want 1 to %d hex digits", th, maxThresholdDigits)
	}
	for i := 0; i < len(th); i++ {
		if c := th[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return 0, fmt.Errorf("ot th %q: want lowercase hex digits", th)
		}
	}
	t, _ := strconv.ParseUint(th+strings.Repeat("0", maxThresholdDigits-len(th)), 16, 64)
	const maxAdjusted = 1 << 56
	return float64(maxAdjusted-t) / maxAdjusted, nil // T < 2^56, so p > 0
}

func pValueProbability(v string) (float64, error) {
	n, err := strconv.Atoi(v)
	switch {
	case err != nil || n < 0 || n > 63:
		return 0, fmt.Errorf("ot p %q: want an integer from 0 to 63", v)
	case n == 63:
		return 0, fmt.Errorf("ot p:63 %w", errNoProbability)
	}
	return 1 / float64(uint64(1)<<n), nil
}
