package assemble

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
)

// child is a plain span of the test turn (no retrieval, no generation).
func child(id, parent byte) sp {
	return sp{id: id, parent: parent, name: "step", start: ms(1), end: ms(2), attrs: map[string]any{"openinference.span.kind": "CHAIN"}}
}

// step is one export of the test trace at a clock offset, or (no spans) a worker tick then.
type step struct {
	at    time.Duration
	spans []sp
}

// TestCompleteWait checks when a trace is released, by what (ragwatch_assembly_released_total),
// for traces complete at their root, completed after it, made incomplete again, and never
// complete. The config is defaultCfg (wait 2s, complete_wait 250ms, timeout 60s).
func TestCompleteWait(t *testing.T) {
	root, ret, llm := rootSpan(ms(950)), retrieverSpan(), llmSpan(ms(60), ms(900))
	var many []sp // a complete turn of 3 + 70 spans
	for i := range 70 {
		many = append(many, child(byte(10+i), 1))
	}
	many = append(many, ret, llm, root)
	remoteRoot := sp{id: 1, parent: 9, name: "POST /ask", kind: ptrace.SpanKindServer, remote: true, end: ms(950)}
	selfParent := child(7, 7)
	for _, tc := range []struct {
		name    string
		cfg     func(*config.Assembly)
		steps   []step
		release time.Duration // when the trace leaves
		reason  string
		partial bool // no root: the record is partial
	}{
		{name: "complete in one export, root last",
			steps: []step{{0, []sp{ret, llm, root}}}, release: ms(250), reason: ReleaseComplete},
		{name: "complete in one export, root first",
			steps: []step{{0, []sp{root, ret, llm}}}, release: ms(250), reason: ReleaseComplete},
		{name: "children first, root later",
			steps: []step{{0, []sp{ret, llm}}, {time.Second, []sp{root}}}, release: ms(1250), reason: ReleaseComplete},
		{name: "root first, the rest in a later export",
			steps: []step{{0, []sp{root}}, {ms(500), []sp{ret}}, {time.Second, []sp{llm}}}, release: ms(1250), reason: ReleaseComplete},
		{name: "completed just before its wait ends: never later than wait",
			steps: []step{{0, []sp{root, ret}}, {ms(1900), []sp{llm}}}, release: 2 * time.Second, reason: ReleaseComplete},
		{name: "generation after the wait passed (deferred)",
			steps: []step{{0, []sp{root, ret}}, {2 * time.Second, nil}, {5 * time.Second, []sp{llm}}}, release: ms(5250), reason: ReleaseComplete},
		{name: "a straggler with a held parent keeps it complete",
			steps: []step{{0, []sp{ret, llm, root}}, {ms(100), []sp{child(5, 3)}}}, release: ms(250), reason: ReleaseComplete},
		{name: "a duplicate span keeps it complete",
			steps: []step{{0, []sp{ret, llm, root}}, {ms(100), []sp{ret}}}, release: ms(250), reason: ReleaseComplete},
		{name: "dangling parent",
			steps: []step{{0, []sp{child(8, 7), ret, llm, root}}}, release: 2 * time.Second, reason: ReleaseWait},
		{name: "self-parent span dangles",
			steps: []step{{0, []sp{selfParent, ret, llm, root}}}, release: 2 * time.Second, reason: ReleaseWait},
		{name: "dangling parent arrives",
			steps: []step{{0, []sp{child(8, 7), ret, llm, root}}, {ms(500), []sp{child(7, 1)}}}, release: ms(750), reason: ReleaseComplete},
		{name: "a later span with a parent not held: back to wait",
			steps: []step{{0, []sp{ret, llm, root}}, {ms(100), []sp{child(8, 7)}}}, release: ms(2100), reason: ReleaseWait},
		{name: "retrieval only waits for its generation until the timeout",
			steps: []step{{0, []sp{ret, root}}, {2 * time.Second, nil}}, release: time.Minute, reason: ReleaseTimeout},
		{name: "generation only, true root: wait",
			steps: []step{{0, []sp{llm, root}}}, release: 2 * time.Second, reason: ReleaseWait},
		{name: "remote-parent local root is not a true root: wait",
			steps: []step{{0, []sp{ret, llm, remoteRoot}}}, release: 2 * time.Second, reason: ReleaseWait},
		{name: "more than 64 spans: wait",
			steps: []step{{0, many}}, release: 2 * time.Second, reason: ReleaseWait},
		{name: "no root: timeout",
			steps: []step{{0, []sp{ret, llm}}}, release: time.Minute, reason: ReleaseTimeout, partial: true},
		{name: "complete_wait 0",
			cfg:   func(c *config.Assembly) { c.CompleteWait = 0 },
			steps: []step{{0, []sp{ret, llm, root}}}, release: 0, reason: ReleaseComplete},
		{name: "complete_wait equal to wait: as before",
			cfg:   func(c *config.Assembly) { c.CompleteWait = c.Wait },
			steps: []step{{0, []sp{ret, llm, root}}}, release: 2 * time.Second, reason: ReleaseWait},
		{name: "complete_wait equal to wait, root first then the rest: as before",
			cfg:   func(c *config.Assembly) { c.CompleteWait = c.Wait },
			steps: []step{{0, []sp{root}}, {time.Second, []sp{ret, llm}}}, release: 2 * time.Second, reason: ReleaseWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultCfg()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			h := newHarness(t, cfg)
			for _, s := range tc.steps {
				if s.spans == nil {
					h.processAt(t, s.at)
					continue
				}
				h.consumeAt(t, s.at, build(t, 1, "s", s.spans...))
				h.processAt(t, s.at) // the worker ticks as spans come
			}
			if tc.release > 0 { // (0: released by the tick at arrival)
				h.processAt(t, tc.release-time.Nanosecond)
				if recs, _ := h.out.got(); len(recs) != 0 || h.a.Held() != 1 {
					t.Fatalf("released before %v: %d records, %d held", tc.release, len(recs), h.a.Held())
				}
			}
			h.processAt(t, tc.release)
			recs, _ := h.out.got()
			outcome := OutcomeAssembled
			if tc.partial {
				outcome = OutcomePartial
			}
			if len(recs) != 1 || h.a.Held() != 0 || h.count("records", outcome) != 1 {
				t.Fatalf("at %v: %d records, %d held, %s %v", tc.release, len(recs), h.a.Held(), outcome, h.count("records", outcome))
			}
			for _, r := range releaseReasons {
				want := 0.0
				if r == tc.reason {
					want = 1
				}
				if got := testutil.ToFloat64(h.a.m.releasedVec.WithLabelValues(r)); got != want {
					t.Errorf("released{reason=%q} = %v, want %v", r, got, want)
				}
			}
			if h.count("late", "") != 0 {
				t.Errorf("late %v", h.count("late", ""))
			}
		})
	}
}

// A span of a trace released at complete_wait that arrives afterwards is late, as after wait.
func TestLateAfterCompleteWait(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.consumeAt(t, 0, build(t, 1, "s", retrieverSpan(), llmSpan(ms(60), ms(900)), rootSpan(ms(950))))
	h.processAt(t, ms(250))
	h.consumeAt(t, ms(300), build(t, 1, "s", child(5, 1)))
	if recs, _ := h.out.got(); len(recs) != 1 || h.a.Held() != 0 || h.count("late", "") != 1 {
		t.Fatalf("%d records, %d held, late %v", len(recs), h.a.Held(), h.count("late", ""))
	}
}

// Shutdown releases what is held with reason shutdown.
func TestReleasedAtShutdown(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.consumeAt(t, 0, build(t, 1, "s", retrieverSpan(), llmSpan(ms(60), ms(900)), rootSpan(ms(950))))
	if err := h.a.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(h.a.m.released[relShutdown]); got != 1 || h.count("records", OutcomeAssembled) != 1 {
		t.Fatalf("released{shutdown} %v, assembled %v", got, h.count("records", OutcomeAssembled))
	}
}

// The worker ticks every quarter of wait (10 ms to 250 ms) while little is held, so that
// bursts stay large at moderate rates, and while much is held eight times as often, at
// least every quarter of complete_wait, so that complete traces leave within 1.25 ×
// complete_wait of their root at full speed.
func TestTickIntervals(t *testing.T) {
	for _, tc := range []struct {
		wait, complete, every, fast time.Duration
	}{
		{2 * time.Second, 50 * time.Millisecond, 250 * time.Millisecond, 12500 * time.Microsecond},
		{2 * time.Second, 250 * time.Millisecond, 250 * time.Millisecond, 31250 * time.Microsecond},
		{2 * time.Second, 2 * time.Second, 250 * time.Millisecond, 31250 * time.Microsecond},
		{2 * time.Second, 0, 250 * time.Millisecond, time.Millisecond},
		{100 * time.Millisecond, 100 * time.Millisecond, 25 * time.Millisecond, 3125 * time.Microsecond},
		{100 * time.Millisecond, 8 * time.Millisecond, 25 * time.Millisecond, 2 * time.Millisecond},
		{0, 0, 10 * time.Millisecond, 1250 * time.Microsecond},
	} {
		cfg := defaultCfg()
		cfg.Wait, cfg.CompleteWait = tc.wait, tc.complete
		every, fast := newHarness(t, cfg).a.tickIntervals()
		if every != tc.every || fast != tc.fast {
			t.Errorf("wait %v complete_wait %v: ticks %v and %v, want %v and %v", tc.wait, tc.complete, every, fast, tc.every, tc.fast)
		}
	}
}

// danglingScan is trace.dangling computed from scratch: the spans whose parent is set and
// held by no span but, when the span is the first of that id, itself (a self-parent span
// dangles; a duplicate of it does not make it whole). -1 beyond maxTrackedSpans.
func danglingScan(spans []span.Span) int {
	if len(spans) > maxTrackedSpans {
		return -1
	}
	n := 0
	for i := range spans {
		p := spans[i].ParentSpanID
		if p.IsEmpty() {
			continue
		}
		first := -1
		for j := range spans {
			if spans[j].SpanID == p {
				first = j
				break
			}
		}
		if first < 0 || first == i {
			n++
		}
	}
	return n
}

// checkDangling compares every held trace's dangling count with danglingScan.
func checkDangling(t testing.TB, a *Assembler) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, tr := range a.traces {
		if want := danglingScan(tr.spans); int(tr.dangling) != want {
			t.Fatalf("trace %s: dangling %d, scan says %d (%d spans)", id, tr.dangling, want, len(tr.spans))
		}
	}
}

// TestDanglingMatchesScan adds spans with random ids and parents (duplicates, self-parents,
// parents that come later or never) in random batches, and checks the incremental count
// against a scan after every batch.
func TestDanglingMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		h := newHarness(t, defaultCfg())
		n := 1 + r.IntN(80)
		var batch []span.Span
		for i := range n {
			s := span.Span{TraceID: tid(byte(r.IntN(3))), SpanID: pcommon.SpanID{byte(r.IntN(12))}}
			if r.IntN(5) > 0 {
				s.ParentSpanID = pcommon.SpanID{byte(r.IntN(12))}
			}
			batch = append(batch, s)
			if r.IntN(4) == 0 || i == n-1 {
				h.a.Add(batch)
				batch = batch[:0]
				checkDangling(t, h.a)
			}
		}
		if t.Failed() {
			t.Fatalf("round %d", round)
		}
	}
}

// Crossing fastTickBytes wakes the worker, which would otherwise sleep out its slow tick while
// traces pile up (at full speed, a quarter of a second of traffic).
func TestCrossingFastTickBytesKicks(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.a.fastTickBytes = 1 << 30
	h.consumeAt(t, 0, build(t, 1, "s", retrieverSpan(), llmSpan(ms(60), ms(900))))
	if n := len(h.a.kick); n != 0 {
		t.Fatalf("light: %d kicks pending, want 0", n)
	}
	h.a.fastTickBytes = h.a.bytes // at the threshold, not over it
	h.consumeAt(t, ms(1), build(t, 2, "s", retrieverSpan(), llmSpan(ms(60), ms(900))))
	if n := len(h.a.kick); n != 1 {
		t.Fatalf("crossed the threshold: %d kicks pending, want 1", n)
	}
	<-h.a.kick
	h.consumeAt(t, ms(2), build(t, 3, "s", retrieverSpan(), llmSpan(ms(60), ms(900))))
	if n := len(h.a.kick); n != 0 {
		t.Fatalf("already heavy: %d kicks pending, want 0", n)
	}
}

// The worker ticks eight times as often while the traces held weigh more than
// fastTickBytes, so that at full speed complete traces do not wait a whole tick more.
func TestFastTickWhileHeavy(t *testing.T) {
	h := newHarness(t, defaultCfg())
	every, fast := 250*time.Millisecond, 31*time.Millisecond
	if got := h.a.nextTick(every, fast); got != every {
		t.Fatalf("nothing held: next tick in %v, want %v", got, every)
	}
	h.consumeAt(t, 0, build(t, 1, "s", retrieverSpan(), llmSpan(ms(60), ms(900))))
	held := h.a.bytes
	if held <= 0 {
		t.Fatalf("held bytes %d after a trace", held)
	}
	h.a.fastTickBytes = held
	if got := h.a.nextTick(every, fast); got != every {
		t.Fatalf("held %d bytes, at the threshold: next tick in %v, want %v", held, got, every)
	}
	h.a.fastTickBytes = held - 1
	if got := h.a.nextTick(every, fast); got != fast {
		t.Fatalf("held %d bytes, over the threshold: next tick in %v, want %v", held, got, fast)
	}
	if err := h.a.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := h.a.nextTick(every, fast); got != every {
		t.Fatalf("all released: next tick in %v, want %v", got, every)
	}
}
