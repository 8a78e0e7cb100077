package main

import (
	"os/exec"
	"strings"
	"testing"
)

// testOnly are the modules and packages only tests use. Go has no test-only require in go.mod
// (they are listed there like any dependency, and `go mod why` names the test that needs
// them), so what keeps them out of the shipped binary is that no non-test package imports them:
// this fails when one does.
var testOnly = []string{
	"testing",
	"net/http/httptest",
	"testing/fstest",
	"go.uber.org/goleak",
	"github.com/Masterminds/sprig/",
	"k8s.io/",
	"sigs.k8s.io/",
	"github.com/kylelemons/godebug/",
	"github.com/prometheus/client_golang/prometheus/testutil",
	"github.com/ragwatch/ragwatch/internal/testutil",
}

func TestBinaryLinksNoTestOnlyDependency(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, tags := range []string{"", "grpcnotrace"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 100 {
			t.Fatalf("go list listed only %d packages: %q", len(deps), out)
		}
		for _, p := range deps {
			for _, bad := range testOnly {
				if p == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(p, bad)) || strings.HasPrefix(p, bad+"/") {
					t.Errorf("the binary (tags %q) links test-only %s: find who imports it with `go list -deps -f '{{.ImportPath}} {{.Imports}}' ./cmd/ragwatch`", tags, p)
				}
			}
		}
	}
}
