package logflood

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeClock is a clock the test moves, with the timers it owes.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) after(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, fakeTimer{c.t.Add(d), f})
}

// advance moves the clock and fires the timers that came due.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	var due []func()
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.at.After(c.t) {
			due = append(due, tm.f)
		} else {
			kept = append(kept, tm)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

func newTest(t *testing.T, burst int) (*slog.Logger, *bytes.Buffer, *fakeClock, *prometheus.Registry) {
	t.Helper()
	var buf bytes.Buffer
	clock := &fakeClock{t: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	h, err := New(slog.NewTextHandler(&buf, nil), Settings{
		Burst: burst, Interval: time.Minute, Registerer: reg, now: clock.now, after: clock.after,
	})
	if err != nil {
		t.Fatal(err)
	}
	return slog.New(h), &buf, clock, reg
}

func lines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestFloodOfOneKindIsCutToTheBurstAndACount(t *testing.T) {
	log, buf, clock, reg := newTest(t, 5)
	sub := log.With("component", "natsin")
	for i := range 100_000 {
		sub.Warn("NATS message rejected", "reason", "bad_json", "n", i)
	}
	got := lines(buf)
	if len(got) != 5 {
		t.Fatalf("%d lines written during the flood, want the 5 of the burst:\n%s", len(got), buf.String())
	}
	if !strings.Contains(got[4], "n=4") || !strings.Contains(got[0], "component=natsin") {
		t.Errorf("the burst is not the first five records with their attributes: %q", got)
	}
	want := `
# HELP ragwatch_log_messages_suppressed_total Log records not written because more than the first few of their kind (level and message) came within a minute; one summary line per kind and minute counts them.
# TYPE ragwatch_log_messages_suppressed_total counter
ragwatch_log_messages_suppressed_total{level="WARN"} 99995
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	clock.advance(time.Minute)
	got = lines(buf)
	if len(got) != 6 {
		t.Fatalf("after the interval %d lines, want the burst and one summary:\n%s", len(got), buf.String())
	}
	sum := got[5]
	for _, want := range []string{"level=WARN", `msg="log messages suppressed: NATS message rejected"`, "suppressed=99995", "since=1m0s", "component=natsin"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary %q lacks %q", sum, want)
		}
	}

	// A new interval: the kind has its allowance again, and no summary is owed.
	buf.Reset()
	log.Warn("NATS message rejected", "n", "again")
	clock.advance(2 * time.Minute)
	if got := lines(buf); len(got) != 1 || !strings.Contains(got[0], "n=again") {
		t.Errorf("in the next interval got %q, want the one record and no summary", got)
	}
}

func TestKindsAreLimitedApart(t *testing.T) {
	log, buf, _, _ := newTest(t, 2)
	for range 10 {
		log.Warn("a")
		log.Warn("b")
		log.Error("a") // another level is another kind
	}
	got := lines(buf)
	if len(got) != 6 {
		t.Fatalf("%d lines, want 2 of each of three kinds:\n%s", len(got), buf.String())
	}
}

func TestAQuietKindIsNeverSummarized(t *testing.T) {
	log, buf, clock, _ := newTest(t, 3)
	for range 3 {
		log.Info("listening")
		clock.advance(10 * time.Minute)
	}
	for _, l := range lines(buf) {
		if strings.Contains(l, "suppressed") {
			t.Fatalf("summary for a kind within its allowance: %q", l)
		}
	}
	if n := len(lines(buf)); n != 3 {
		t.Fatalf("%d lines, want 3", n)
	}
}

func TestKindsPastTheBoundShareOneAllowance(t *testing.T) {
	log, buf, clock, _ := newTest(t, 1)
	for i := range maxKinds + 50 {
		log.Warn("kind " + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String())
	}
	n := len(lines(buf))
	if n != maxKinds+1 {
		t.Fatalf("%d lines, want one per kind up to the bound and one for the rest (%d)", n, maxKinds+1)
	}
	clock.advance(time.Minute)
	last := lines(buf)[len(lines(buf))-1]
	if !strings.Contains(last, "(other messages)") || !strings.Contains(last, "suppressed=49") {
		t.Errorf("summary of the shared allowance: %q", last)
	}
}

func TestEnabledFollowsTheWrappedHandler(t *testing.T) {
	h, err := New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Enabled(context.Background(), slog.LevelInfo) || !h.Enabled(context.Background(), slog.LevelError) {
		t.Error("Enabled does not follow the wrapped handler's level")
	}
}

func TestHandlersOnOneRegistryShareTheCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		h, err := New(slog.NewTextHandler(io.Discard, nil), Settings{Burst: 1, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		log := slog.New(h)
		log.Warn("x")
		log.Warn("x")
	}
	if n, err := testutil.GatherAndCount(reg, "ragwatch_log_messages_suppressed_total"); err != nil || n != 1 {
		t.Fatalf("%d series, err %v; want one", n, err)
	}
	mfs, _ := reg.Gather()
	if v := mfs[0].GetMetric()[0].GetCounter().GetValue(); v != 2 {
		t.Errorf("suppressed = %v, want 2 (one from each handler)", v)
	}
}
