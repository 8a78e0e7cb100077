package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCreatePrivateNarrowsAnExistingFile(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.jsonl")
	old := filepath.Join(dir, "old.jsonl")
	if err := os.WriteFile(old, []byte("old content that is longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fresh, old} {
		f, err := createPrivate(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("new"); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want -rw-------", filepath.Base(p), fi.Mode().Perm())
		}
		if b, _ := os.ReadFile(p); string(b) != "new" {
			t.Errorf("%s: content %q, want the new content alone", filepath.Base(p), b)
		}
	}
}
