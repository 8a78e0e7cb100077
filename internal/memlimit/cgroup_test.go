package memlimit

import (
	"math"
	"runtime/debug"
	"testing"
	"testing/fstest"
)

func TestCgroupLimit(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name  string
		fs    fstest.MapFS
		limit uint64
		ok    bool
		err   bool
	}{
		{"v2 namespaced", fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("134217728\n"),
		}, 128 << 20, true, false},
		{"v2 own cgroup before root", fstest.MapFS{
			"proc/self/cgroup":                          file("0::/kubepods/pod1/c1\n"),
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": file("67108864\n"),
			"sys/fs/cgroup/memory.max":                  file("max\n"),
		}, 64 << 20, true, false},
		{"v2 unlimited", fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("max\n"),
		}, 0, false, false},
		{"v1", fstest.MapFS{
			"proc/self/cgroup": file("5:cpuacct,cpu:/\n4:memory:/docker/abc\n"),
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": file("268435456\n"),
		}, 256 << 20, true, false},
		{"v1 root, no proc", fstest.MapFS{
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("268435456\n"),
		}, 256 << 20, true, false},
		{"v1 unlimited is a huge value", fstest.MapFS{
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n"),
		}, 0, false, false},
		{"missing", fstest.MapFS{"proc/self/cgroup": file("0::/\n")}, 0, false, false},
		{"garbage", fstest.MapFS{"sys/fs/cgroup/memory.max": file("lots\n")}, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit, ok, err := CgroupLimit(tc.fs)
			if (err != nil) != tc.err || limit != tc.limit || ok != tc.ok {
				t.Fatalf("CgroupLimit = %d, %v, %v; want %d, %v, error %v", limit, ok, err, tc.limit, tc.ok, tc.err)
			}
		})
	}
}

// With no GOMEMLIMIT, the runtime's soft limit comes from the cgroup (90% of it), and a guard
// built after it follows it: the guard works in a container with no configuration.
func TestFromCgroupSetsGoLimitAndGuard(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	if prev != math.MaxInt64 {
		t.Skip("a memory limit is already set in this environment")
	}
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	cg := fstest.MapFS{"sys/fs/cgroup/memory.max": &fstest.MapFile{Data: []byte("1000000000\n")}}

	noEnv := func(string) string { return "" }
	if New(0, nil).Limit() != 0 {
		t.Fatal("guard has a limit before FromCgroup")
	}
	set, err := FromCgroup(fstest.MapFS{}, noEnv)
	if err != nil || set != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("no cgroup file: set %d, %v", set, err)
	}
	withEnv := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "100MiB"
		}
		return ""
	}
	if set, err := FromCgroup(cg, withEnv); err != nil || set != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("GOMEMLIMIT in the environment was overridden: set %d, %v", set, err)
	}

	set, err = FromCgroup(cg, noEnv)
	if err != nil || set != 900000000 {
		t.Fatalf("FromCgroup = %d, %v; want 900000000", set, err)
	}
	if got := debug.SetMemoryLimit(-1); got != 900000000 {
		t.Fatalf("runtime limit = %d", got)
	}
	if got := New(0, nil).Limit(); got != 900000000/10*9 {
		t.Fatalf("guard limit = %d, want 90%% of the runtime limit", got)
	}
	// A second call (a limit is now set) leaves it alone.
	if set, _ := FromCgroup(fstest.MapFS{"sys/fs/cgroup/memory.max": &fstest.MapFile{Data: []byte("5000\n")}}, noEnv); set != 0 {
		t.Fatalf("second FromCgroup set %d", set)
	}
}

// The Go limit leaves NonGoReserve of a container to what Go does not count (the binary's
// pages, the off-heap tables): 90% of a large limit, the limit less 48 MiB of a small one, and
// never less than half.
func TestGoLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct{ limit, want int64 }{
		{128 * mib, 80 * mib},
		{256 * mib, 208 * mib},
		{1024 * mib, 966367641}, // 90%: 921.6 MiB
		{96 * mib, 48 * mib},
		{64 * mib, 32 * mib},
	} {
		if got := GoLimit(tc.limit); got != tc.want {
			t.Errorf("GoLimit(%d MiB) = %.1f MiB, want %.1f MiB", tc.limit/mib, float64(got)/mib, float64(tc.want)/mib)
		}
	}
}
