package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The release build (make build, the Dockerfile) uses the grpcnotrace tag so that no package
// calls reflect.Value.MethodByName: text/template does, and once it is linked the linker keeps
// every exported method of every reachable type (the binary grows from 55 to 87 MB). This
// fails when a new dependency brings a template package back.
func TestReleaseBuildLinksNoTemplatePackage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-tags", "grpcnotrace", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list listed only %d packages: %q", len(deps), out)
	}
	for _, p := range deps {
		if p == "text/template" || p == "html/template" {
			t.Errorf("the release build links %s: find who imports it with `go list -tags grpcnotrace -deps -f '{{.ImportPath}} {{.Imports}}' ./cmd/ragwatch`", p)
		}
	}
}

// The image is FROM scratch, so the release build must carry what a base image would have
// given it: CA roots and the time zone database. Both come from the Makefile's tags and imports.
func TestReleaseBuildCarriesRootsAndZones(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var tags string
	for line := range strings.Lines(string(mk)) {
		if v, ok := strings.CutPrefix(line, "TAGS"); ok {
			_, tags, _ = strings.Cut(v, "?=")
			tags = strings.TrimSpace(tags)
		}
	}
	if tags == "" {
		t.Fatal("no TAGS line in the Makefile")
	}
	out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{"golang.org/x/crypto/x509roots/fallback", "time/tzdata"} {
		if !slices.Contains(deps, want) {
			t.Errorf("the release build (tags %q) does not link %s; the scratch image needs it", tags, want)
		}
	}
}
