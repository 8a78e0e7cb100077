package memlimit

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

func TestExecutableRanges(t *testing.T) {
	maps := []byte(`00400000-01b22000 r-xp 00000000 fd:01 4456799                            /usr/local/bin/ragwatch
01b22000-03765000 r--p 01722000 fd:01 4456799                            /usr/local/bin/ragwatch
03765000-0380e000 rw-p 03365000 fd:01 4456799                            /usr/local/bin/ragwatch
0380e000-03870000 rw-p 00000000 00:00 0
04000000-04001000 r--p 00000000 fd:02 4456799                            /other/device/same/inode
c000000000-c004000000 rw-p 00000000 00:00 0
7ffd6a7e4000-7ffd6a7e8000 r--p 00000000 00:00 0                          [vvar]
7ffd6a7e8000-7ffd6a7ea000 r-xp 00000000 00:00 0                          [vdso]
7f0000000000-7f0000001000 r--p 00000000 fd:01 4456800                    /another/file
zz000000-05000000 r--p 00000000 fd:01 4456799 /usr/local/bin/ragwatch
06000000-05000000 r--p 00000000 fd:01 4456799 /usr/local/bin/ragwatch
07000000-08000000 r--p 00000000 fd01 4456799 /usr/local/bin/ragwatch
09000000-0a000000 r--p 00000000 fd:01
`)
	want := []mapping{{0x00400000, 0x01b22000}, {0x01b22000, 0x03765000}}
	for _, addr := range []uint64{0x00400000, 0x00a00000, 0x01b21fff} { // in the code
		if got := executableRanges(maps, addr); !reflect.DeepEqual(got, want) {
			t.Fatalf("executableRanges(%#x) = %x, want %x", addr, got, want)
		}
	}
	for _, addr := range []uint64{0x01b22000, 0x03800000} {
		if got := executableRanges(maps, addr); !reflect.DeepEqual(got, want) {
			t.Fatalf("an address in the file's data (%#x): %x, want %x", addr, got, want)
		}
	}
	if got := executableRanges(maps, 0x7f0000000800); !reflect.DeepEqual(got, []mapping{{0x7f0000000000, 0x7f0000001000}}) {
		t.Fatalf("an address in another file: %x", got)
	}
	for _, addr := range []uint64{0xc000001000, 0x7ffd6a7e9000, 0x100, 0x07800000} {
		if got := executableRanges(maps, addr); got != nil {
			t.Fatalf("executableRanges(%#x) (anonymous, vdso, unmapped, on a malformed line) = %x, want none", addr, got)
		}
	}
}

func TestRSSFile(t *testing.T) {
	status := []byte("Name:\tragwatch\nVmRSS:\t   83208 kB\nRssAnon:\t   49224 kB\nRssFile:\t   33984 kB\nRssShmem:\t       0 kB\n")
	if got := rssFile(status); got != 33984<<10 {
		t.Fatalf("rssFile = %d, want %d", got, 33984<<10)
	}
	if got := rssFile([]byte("Name:\tx\n")); got != -1 {
		t.Fatalf("rssFile without the line = %d, want -1", got)
	}
}

// TestReleaseExecutablePages runs it on the test binary: its startup left pages of it resident,
// and the kernel takes most of them back.
func TestReleaseExecutablePages(t *testing.T) {
	var fs unix.Statfs_t
	if err := unix.Statfs("/proc/self/exe", &fs); err == nil && fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the test binary is on tmpfs: its pages are shared memory, which MADV_PAGEOUT reclaims only to swap")
	}
	r, err := ReleaseExecutablePages()
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		t.Skipf("this kernel has no MADV_PAGEOUT: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	if r.Advised <= 0 || r.Advised > fi.Size()+1<<20 {
		t.Fatalf("advised %d bytes of a %d-byte executable", r.Advised, fi.Size())
	}
	if r.Before <= 0 || r.After < 0 || r.After >= r.Before {
		t.Fatalf("RssFile before %d, after %d bytes: want it lower after", r.Before, r.After)
	}
	t.Logf("RssFile %d KiB -> %d KiB (%d KiB of the executable advised)", r.Before>>10, r.After>>10, r.Advised>>10)
}
