package main

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ragwatch/ragwatch/"

// stages are the three parts of the data path. Each may import internal/ and config, never one
// of the other two: what they share lives in internal/ (docs/architecture.md, "Layout rules").
var stages = []string{"collector", "sampler", "alerts"}

// TestLayout keeps the import graph the shape docs/architecture.md draws: no stage imports
// another, nothing in internal/ imports a stage, config or the binary, and config imports no
// stage.
// Only the product's own (non-test) imports count: a test may reach wherever it must.
func TestLayout(t *testing.T) {
	pkgs := productImports(t, "../..")
	if len(pkgs) < 20 {
		t.Fatalf("found %d packages under the module root; the walk is broken", len(pkgs))
	}
	for pkg, imports := range pkgs {
		top, _, _ := strings.Cut(pkg, "/")
		for _, imp := range imports {
			impTop, _, _ := strings.Cut(imp, "/")
			switch {
			case slices.Contains(stages, top) && slices.Contains(stages, impTop) && top != impTop:
				t.Errorf("%s imports %s: stages do not import each other; move what they share to internal/", pkg, imp)
			case top == "internal" && (slices.Contains(stages, impTop) || impTop == "cmd"):
				t.Errorf("%s imports %s: internal/ holds what every stage shares and imports no stage", pkg, imp)
			case top == "internal" && impTop == "config":
				t.Errorf("%s imports %s: internal/ imports nothing from config; a settings type lives with the code that uses it and config embeds it (natsconn.Config)", pkg, imp)
			case top == "config" && slices.Contains(stages, impTop):
				t.Errorf("%s imports %s: config is read by the stages, it does not import them", pkg, imp)
			}
		}
	}
}

// productImports maps every package under root (as a module-relative path) to the
// module-relative paths of the module packages its non-test files import.
func productImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		var imports []string
		for _, imp := range p.Imports {
			if s, ok := strings.CutPrefix(imp, module); ok {
				imports = append(imports, s)
			}
		}
		out[filepath.ToSlash(rel)] = imports
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
