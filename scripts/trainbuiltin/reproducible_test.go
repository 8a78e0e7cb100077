//go:build quality

// The reproducibility check retrains every model (about 15 s of CPU), so it runs behind a tag:
//
//	go test -tags quality ./scripts/trainbuiltin/ -args -data ../shared/data

package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// dataDir is where the shared data is: go test ./scripts/trainbuiltin/ -args -data DIR
// (default: ../shared/data beside the repository root, as CI lays it out).
var dataDir = flag.String("data", "", "shared data directory")

// TestCommittedModelIsReproducible retrains on the shared data and compares with the committed
// model_fit.go byte for byte: the weights in the repository are what the command gives. It
// skips without the data, except in CI (CI=true), where the data is laid out on purpose.
func TestCommittedModelIsReproducible(t *testing.T) {
	dir := *dataDir
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "data")
	}
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: %v (CI=true: the reproducibility check must run)", dir, err)
		}
		t.Skipf("%s: %v", dir, err)
	}
	out := filepath.Join(t.TempDir(), "model_fit.go")
	if err := train(io.Discard, dir, out, false, false); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "sampler", "scorers", "builtin", "model_fit.go"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("retrained model differs from the committed model_fit.go: run go run ./scripts/trainbuiltin -data ../shared/data\n%s", got)
	}
}
