package main

import (
	"os/exec"
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
