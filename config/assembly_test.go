package config

import (
	"testing"
	"time"
)

func TestAssemblyDefaults(t *testing.T) {
	want := Assembly{Wait: 2 * time.Second, CompleteWait: 50 * time.Millisecond, Timeout: time.Minute, MaxTraces: 50000, MaxBytes: 0}
	if got := Default().Assembly; got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
}

func TestAssemblyParse(t *testing.T) {
	def := Default().Assembly
	with := func(f func(*Assembly)) Assembly { a := def; f(&a); return a }
	for _, tc := range []struct {
		name, yaml string
		want       Assembly
	}{
		{"defaults", "", def},
		{"complete_wait set", "assembly:\n  complete_wait: 100ms\n", with(func(a *Assembly) { a.CompleteWait = 100 * time.Millisecond })},
		{"equal to wait", "assembly:\n  wait: 1s\n  complete_wait: 1s\n", with(func(a *Assembly) { a.Wait, a.CompleteWait = time.Second, time.Second })},
		{"zero", "assembly:\n  complete_wait: 0s\n", with(func(a *Assembly) { a.CompleteWait = 0 })},
		// A file older than complete_wait with a wait below its default: the default follows.
		{"lower wait, complete_wait left out", "assembly:\n  wait: 30ms\n", with(func(a *Assembly) { a.Wait, a.CompleteWait = 30*time.Millisecond, 30*time.Millisecond })},
		{"wait above the default complete_wait", "assembly:\n  wait: 100ms\n", with(func(a *Assembly) { a.Wait = 100 * time.Millisecond })},
		{"zero wait, complete_wait left out", "assembly:\n  wait: 0s\n", with(func(a *Assembly) { a.Wait, a.CompleteWait = 0, 0 })},
		{"higher wait keeps the default", "assembly:\n  wait: 5s\n", with(func(a *Assembly) { a.Wait = 5 * time.Second })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if c.Assembly != tc.want {
				t.Fatalf("assembly = %+v, want %+v", c.Assembly, tc.want)
			}
		})
	}
}

func TestAssemblyInvalid(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"negative", "assembly:\n  complete_wait: -1ms\n",
			"line 2: `assembly.complete_wait` must not be negative"},
		{"larger than wait", "assembly:\n  wait: 1s\n  complete_wait: 1500ms\n",
			"line 3: `assembly.complete_wait` must not be larger than `wait` (1s)"},
		{"larger than the default wait", "assembly:\n  complete_wait: 3s\n",
			"line 2: `assembly.complete_wait` must not be larger than `wait` (2s)"},
		{"negative wait is the only problem", "assembly:\n  wait: -1s\n",
			"line 2: `assembly.wait` must not be negative"},
		{"both", "assembly:\n  wait: -1s\n  complete_wait: -2s\n",
			"line 2: `assembly.wait` must not be negative\nline 3: `assembly.complete_wait` must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
	// Validate alone (a config built in code) has no line and no follow rule.
	a := Default().Assembly
	a.Wait = 30 * time.Millisecond
	if err := a.Validate(); err == nil || err.Error() != "`complete_wait` must not be larger than `wait` (30ms)" {
		t.Fatalf("Validate = %v", err)
	}
}
