package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleaseExecutablePages asks the kernel to reclaim the resident pages of the process's own
// executable (its code and read-only data), once ragwatch has started. Starting touches far
// more of a Go binary than serving does — every package's initialisation, the embedded NATS
// server's start, the config's parsing — and those pages stay resident, charged to the
// container, until memory runs short: of the binary's 33 MiB resident at 1,000 traces/s,
// about 10 MiB. The pages serving needs fault back in from the page cache or the file; the
// rest stay out. Pages other processes map too (the same image in another container) are left to
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
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return r, err
	}
	// The executable is the file this function's code is mapped from. Its device and inode
	// are taken from that mapping, not from stat(/proc/self/exe): on overlayfs (a container's
	// root file system) the maps may name the underlying layer's file where stat names the
	// overlay's.
	code := uint64(reflect.ValueOf(ReleaseExecutablePages).Pointer())
	ranges := executableRanges(maps, code)
	if len(ranges) == 0 {
		return r, fmt.Errorf("no file mapping holds the code at %#x in /proc/self/maps", code)
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
// same file as the range holding addr, an address of the executable's code: its code and
// read-only data. Writable mappings are left out: their written pages are the process's own,
// not the file's. None when addr is in no range or in anonymous memory.
func executableRanges(maps []byte, addr uint64) []mapping {
	type line struct {
		mapping
		writable bool
		file     string // major:minor inode
	}
	var lines []line
	file := ""
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// start-end perms offset major:minor inode [path]
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		s, e, ok := hexPair(f[0], "-", 64)
		if _, _, devOK := hexPair(f[3], ":", 32); !ok || !devOK || e <= s {
			continue
		}
		if ino, err := strconv.ParseUint(f[4], 10, 64); err != nil || ino == 0 {
			continue // anonymous memory
		}
		l := line{mapping: mapping{start: s, end: e}, writable: strings.Contains(f[1], "w"), file: f[3] + " " + f[4]}
		if s <= addr && addr < e {
			file = l.file
		}
		lines = append(lines, l)
	}
	if file == "" {
		return nil
	}
	var out []mapping
	for _, l := range lines {
		if l.file == file && !l.writable {
			out = append(out, l.mapping)
		}
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
