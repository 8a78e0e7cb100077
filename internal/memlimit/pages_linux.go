package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleaseExecutablePages asks the kernel to reclaim the resident pages of the process's own
// executable (its code and read-only data), once ragwatch has started. Starting touches far
// more of a Go binary than serving does — every package's initialisation, the embedded NATS
// server's start, the config's parsing — and those pages stay resident, charged to the
// container, until memory runs short: about a third of ragwatch's resident memory at 1,000
// traces/s. The pages serving needs fault back in from the page cache or the file; the rest
// stay out. Pages other processes map too (the same image in another container) are left to
// them: the kernel reclaims only pages this process alone maps.
//
// It uses madvise(MADV_PAGEOUT) (Linux 5.4 and later); an older kernel refuses it and nothing
// changes.
func ReleaseExecutablePages() (Released, error) {
	var r Released
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return r, err
	}
	r.Before = rssFile(status)
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return r, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return r, err
	}
	ranges := executableRanges(maps, st.Dev, st.Ino)
	if len(ranges) == 0 {
		return r, fmt.Errorf("no mapping of the executable (inode %d) in /proc/self/maps", st.Ino)
	}
	for _, m := range ranges {
		// The range is the kernel's own mapping of the executable, page-aligned; no Go memory.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_PAGEOUT); errno != 0 {
			return r, fmt.Errorf("madvise(MADV_PAGEOUT): %w", errno)
		}
		r.Advised += int64(m.end - m.start)
	}
	if status, err = os.ReadFile("/proc/self/status"); err == nil {
		r.After = rssFile(status)
	}
	return r, nil
}

// mapping is one address range of /proc/self/maps.
type mapping struct {
	start, end uint64
}

// executableRanges returns the read-only ranges of /proc/self/maps (given as maps) that map the
// file with device dev and inode ino: the executable's code and read-only data. Writable
// mappings are left out: their written pages are the process's own, not the file's.
func executableRanges(maps []byte, dev, ino uint64) []mapping {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// start-end perms offset major:minor inode [path]
		f := strings.Fields(sc.Text())
		if len(f) < 5 || strings.Contains(f[1], "w") {
			continue
		}
		if n, err := strconv.ParseUint(f[4], 10, 64); err != nil || n != ino || n == 0 {
			continue
		}
		maj, mnr, ok := hexPair(f[3], ":", 32)
		if !ok || unix.Mkdev(uint32(maj), uint32(mnr)) != dev {
			continue
		}
		s, e, ok := hexPair(f[0], "-", 64)
		if !ok || e <= s {
			continue
		}
		out = append(out, mapping{start: s, end: e})
	}
	return out
}

// hexPair parses "a<sep>b" of two hexadecimal numbers of at most bits bits.
func hexPair(s, sep string, bits int) (a, b uint64, ok bool) {
	x, y, ok := strings.Cut(s, sep)
	if !ok {
		return 0, 0, false
	}
	a, err1 := strconv.ParseUint(x, 16, bits)
	b, err2 := strconv.ParseUint(y, 16, bits)
	return a, b, err1 == nil && err2 == nil
}

// rssFile reads RssFile (kB) from a /proc/<pid>/status, in bytes; -1 when absent.
func rssFile(status []byte) int64 {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("RssFile:"))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) == 0 {
			return -1
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return -1
		}
		return kb << 10
	}
	return -1
}
