package main

import (
	"bytes"
	"go/build"
	"io/fs"
	"os"
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

// maxPackageLines bounds a product package's non-test Go: past it a package holds more than one
// concept (collector/assemble had 6,900 lines and four concepts; docs/architecture.md). config,
// the one schema of every section, is the exception.
const maxPackageLines = 3000

// TestOneHomePerPackage: no two packages share a name (the separate programs of scripts/ and
// cmd/ are all `main`), and no product package but config holds more than maxPackageLines
// lines of non-test Go.
func TestOneHomePerPackage(t *testing.T) {
	pkgs := productPackages(t, "../..")
	byName := map[string][]string{}
	for rel, p := range pkgs {
		if p.Name != "main" {
			byName[p.Name] = append(byName[p.Name], rel)
		}
		if top, _, _ := strings.Cut(rel, "/"); rel == "config" || top == "scripts" || top == "e2e" {
			continue
		}
		n := 0
		for _, f := range p.GoFiles {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			n += bytes.Count(b, []byte("\n"))
		}
		if n > maxPackageLines {
			t.Errorf("%s has %d lines of non-test Go, more than %d: split it by concept", rel, n, maxPackageLines)
		}
	}
	for name, dirs := range byName {
		if len(dirs) > 1 {
			slices.Sort(dirs)
			t.Errorf("package name %s is used by %v: give each its own name", name, dirs)
		}
	}
}

// productImports maps every package under root (as a module-relative path) to the
// module-relative paths of the module packages its non-test files import.
func productImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for rel, p := range productPackages(t, root) {
		var imports []string
		for _, imp := range p.Imports {
			if s, ok := strings.CutPrefix(imp, module); ok {
				imports = append(imports, s)
			}
		}
		out[rel] = imports
	}
	return out
}

// productPackages maps every package under root (module-relative path) to its build info.
func productPackages(t *testing.T, root string) map[string]*build.Package {
	t.Helper()
	out := map[string]*build.Package{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
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
		out[filepath.ToSlash(rel)] = p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
