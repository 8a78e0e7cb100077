package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// unlimitedAbove is where a cgroup v1 limit means "none": v1 reports no limit as the largest
// page-aligned int64 (9223372036854771712), and no container has an exabyte.
const unlimitedAbove = 1 << 60

// CgroupLimit returns the memory limit of the process's cgroup in bytes, read from fsys rooted
// at "/" (os.DirFS("/") in production, fstest.MapFS in tests): cgroup v2's memory.max, else
// v1's memory.limit_in_bytes, each in the process's own cgroup (from proc/self/cgroup) and then
// at the mount's root, where a container with its own cgroup namespace sees its limit. ok is
// false when no limit is set ("max", a v1 value near 2^63) or no file is readable.
func CgroupLimit(fsys fs.FS) (limit uint64, ok bool, err error) {
	v1, v2 := ownCgroups(fsys)
	candidates := []string{}
	if v2 != "" {
		candidates = append(candidates, path.Join("sys/fs/cgroup", v2, "memory.max"))
	}
	candidates = append(candidates, "sys/fs/cgroup/memory.max")
	if v1 != "" {
		candidates = append(candidates, path.Join("sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"))
	}
	candidates = append(candidates, "sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, name := range candidates {
		b, rerr := fs.ReadFile(fsys, name)
		if errors.Is(rerr, fs.ErrNotExist) {
			continue
		}
		if rerr != nil {
			return 0, false, fmt.Errorf("read cgroup memory limit: %w", rerr)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false, nil
		}
		n, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			return 0, false, fmt.Errorf("parse cgroup memory limit /%s %q: %w", name, s, perr)
		}
		if n == 0 || n >= unlimitedAbove {
			return 0, false, nil
		}
		return n, true, nil
	}
	return 0, false, nil
}

// ownCgroups reads proc/self/cgroup: the v1 memory controller's path and the v2 unified path.
func ownCgroups(fsys fs.FS) (v1, v2 string) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		p := strings.TrimPrefix(parts[2], "/")
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = p
		case hasController(parts[1], "memory"):
			v1 = p
		}
	}
	return v1, v2
}

func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// GoLimitShare is the largest share of the cgroup limit given to the Go runtime's soft memory
// limit: the rest is for what the Go runtime does not count and for the time the GC needs to
// react.
const GoLimitShare = 0.9

// NonGoReserve is what a ragwatch process keeps resident that the Go runtime does not count
// and the cgroup charges: the binary's own pages (code, type descriptors and function table,
// page cache charged to the container: ≈ 33 MiB at start, 17-24 MiB once
// ReleaseExecutablePages has run) and the join's off-heap table (≈ 9 MB at
// feedback.max_entries 200,000). In a 128 MiB cgroup with the Go limit at 90% (115 MiB),
// a run at full speed on the defaults made the kernel evict the binary's pages to make room:
// 275,000 major page faults, ingest down from 14,000 traces/s to a few hundred, a core spent
// re-reading code, never recovered. At 80 MiB the same run completed at 14,400 traces/s with
// 74 major faults (docs/performance-history.md).
const NonGoReserve = 48 << 20

// GoLimit is the Go soft memory limit for a container's memory limit: GoLimitShare of it or
// the limit less NonGoReserve, whichever is smaller, and at least half of it.
func GoLimit(limit int64) int64 {
	return max(min(int64(float64(limit)*GoLimitShare), limit-NonGoReserve), limit/2)
}

// FromCgroup sets the Go runtime's soft memory limit (debug.SetMemoryLimit) to GoLimit of the
// cgroup's memory limit when the environment does not set GOMEMLIMIT, so that the GC and
// the guard (New's limitMiB 0 follows it) work in a container without any configuration.
// getenv is os.Getenv in production. It returns the limit it set, 0 when it set none.
func FromCgroup(fsys fs.FS, getenv func(string) string) (int64, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, nil // the operator's choice, already applied by the runtime
	}
	if cur := debug.SetMemoryLimit(-1); cur != math.MaxInt64 {
		return 0, nil // set by the program already
	}
	limit, ok, err := CgroupLimit(fsys)
	if err != nil || !ok {
		return 0, err
	}
	set := GoLimit(int64(limit))
	debug.SetMemoryLimit(set)
	return set, nil
}
