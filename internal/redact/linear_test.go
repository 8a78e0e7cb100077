package redact

import (
	"strings"
	"testing"
	"time"
)

// TestAdversarialTextStaysLinear redacts 8 KB and 64 KB of text built to make each detector
// work hardest (every word a candidate IBAN, phone, e-mail or token) and checks the time grows
// with the size, not with its square: a detector that searched again from each candidate to
// the end of the text would take 64 times as long for 8 times the text. The bound (32x, with
// 8 KB counted as at least 200 µs) leaves room for a machine shared with other work; the best
// of five runs is taken. Under the race detector (make test's unit run) the ratio measures its
// instrumentation, not the detectors, and a loaded machine took 35x there: it skips, and
// `make unit` runs it again without -race.
func TestAdversarialTextStaysLinear(t *testing.T) {
	if raceDetector {
		t.Skip("timing ratios under the race detector measure its instrumentation; run without -race")
	}
	r, err := New(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	best := func(s string) time.Duration {
		d := time.Duration(1 << 62)
		for range 5 {
			start := time.Now()
			_ = r.String(s)
			d = min(d, time.Since(start))
		}
		return d
	}
	for name, unit := range map[string]string{
		"iban-like words": "de89 ", "spaced digits": "1 ", "dotted digits": "1.", "parentheses": "(415)",
		"plus groups": "+1 ", "bracket at": "a(at)", "at signs": "a@", "bearer tokens": "Bearer aaaaaaaaaaaa1 ",
		"spoken e-mail": "x AT y DOT ", "non-ASCII": "é", "digits": "4",
	} {
		small := strings.Repeat(unit, (8<<10)/len(unit))
		large := strings.Repeat(unit, (64<<10)/len(unit))
		ds, dl := best(small), best(large)
		t.Logf("%-16s 8 KB %v, 64 KB %v", name, ds, dl)
		if dl > 32*max(ds, 200*time.Microsecond) {
			t.Errorf("%s: 64 KB took %v, 8 KB %v: more than linear", name, dl, ds)
		}
	}
}
