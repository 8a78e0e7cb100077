package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Tmpfs mounts a tmpfs of size ("8m") on a new temporary directory, unmounted at cleanup, for
// a store whose volume fills: the test skips, saying why, where the machine cannot mount one
// (not root, no tmpfs).
func Tmpfs(tb testing.TB, size string) string {
	tb.Helper()
	dir := tb.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		tb.Skipf("cannot stage a full volume: mount -t tmpfs: %v: %s", err, bytes.TrimSpace(out))
	}
	tb.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			tb.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// FillVolume writes a file into dir until its volume is full and returns the file's path:
// removing it frees the volume.
func FillVolume(tb testing.TB, dir string) string {
	tb.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				tb.Fatalf("filling the volume: %v", err)
			}
			return name
		}
	}
}
