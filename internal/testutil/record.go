package testutil

import (
	"fmt"
	"runtime"
	"testing"
)

// Outcome is how a function given a testing.TB by Record ended.
type Outcome struct {
	Failed  bool   // Fatal, FailNow, Error or Fail was called
	Skipped bool   // Skip, SkipNow or Skipf was called
	Msg     string // the last message given to any of them
}

// Record calls fn with a testing.TB that records failures and skips instead of passing them on
// to t, and returns how fn ended. As with testing.T, Fatal and Skip end fn's goroutine, so fn
// runs in a goroutine of its own. Everything else (Cleanup, TempDir, Setenv, logs) is t's. It is
// for testing helpers that are meant to fail or skip.
func Record(t *testing.T, fn func(tb testing.TB)) Outcome {
	t.Helper()
	r := &recorder{T: t}
	done := make(chan struct{})
	go func() { defer close(done); fn(r) }()
	<-done
	return r.out
}

type recorder struct {
	*testing.T
	out Outcome
}

func (r *recorder) Helper() {}

func (r *recorder) Fail()             { r.out.Failed = true }
func (r *recorder) Error(args ...any) { r.Fail(); r.out.Msg = fmt.Sprint(args...) }
func (r *recorder) Errorf(format string, args ...any) {
	r.Fail()
	r.out.Msg = fmt.Sprintf(format, args...)
}
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Failed() bool                      { return r.out.Failed }
func (r *recorder) SkipNow()                          { r.out.Skipped = true; runtime.Goexit() }
func (r *recorder) Skip(args ...any)                  { r.out.Msg = fmt.Sprint(args...); r.SkipNow() }
func (r *recorder) Skipf(format string, args ...any) {
	r.out.Msg = fmt.Sprintf(format, args...)
	r.SkipNow()
}
func (r *recorder) Skipped() bool { return r.out.Skipped }
