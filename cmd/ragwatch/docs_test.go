package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ragwatch/ragwatch/config"
)

// yamlBlock matches a fenced YAML block of a Markdown file, indented or not (a block inside a
// list item is indented with it).
var yamlBlock = regexp.MustCompile("(?ms)^([ \t]*)```ya?ml\n(.*?)\n[ \t]*```")

// TestConfigDocsLoad keeps every YAML example of the docs and the README that is a ragwatch
// config loadable: a renamed or removed key fails here instead of in a user's hands. A block
// whose top-level keys are all ragwatch's is loaded with config.Parse; a block with none of
// them is another tool's (a Kubernetes manifest, a Collector config) and is skipped; a block
// that mixes both fails, so a ragwatch fragment cannot hide among foreign keys.
func TestConfigDocsLoad(t *testing.T) {
	ours := configKeys()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	loaded := 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlBlock.FindAllStringSubmatch(string(data), -1) {
			body := dedent(m[2], m[1])
			var top map[string]any
			if err := yaml.Unmarshal([]byte(body), &top); err != nil {
				t.Errorf("%s: YAML block %d is not YAML: %v\n%s", path, i+1, err, body)
				continue
			}
			var mine, theirs []string
			for k := range top {
				if ours[k] {
					mine = append(mine, k)
				} else {
					theirs = append(theirs, k)
				}
			}
			switch {
			case len(mine) == 0:
				continue
			case len(theirs) > 0:
				slices.Sort(theirs)
				t.Errorf("%s: YAML block %d mixes ragwatch keys %v with unknown keys %v\n%s", path, i+1, mine, theirs, body)
				continue
			}
			if _, err := config.Parse([]byte(body)); err != nil && !onlyMissingFiles(err, body) {
				t.Errorf("%s: YAML block %d does not load:\n%v\n%s", path, i+1, err, body)
			}
			loaded++
		}
	}
	if loaded < 20 {
		t.Errorf("loaded %d config blocks from docs/ and the README; the walk is broken", loaded)
	}
}

// configKeys lists the top-level keys of a ragwatch config, from config.Config's yaml tags
// (with those of its inline structs).
func configKeys() map[string]bool {
	out := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for i := range typ.NumField() {
			name, opts, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
			switch {
			case strings.Contains(opts, "inline"):
				walk(typ.Field(i).Type)
			case name != "" && name != "-":
				out[name] = true
			}
		}
	}
	walk(reflect.TypeFor[config.Config]())
	return out
}

// dedent removes the indentation of a block that sits inside a Markdown list item.
func dedent(body, indent string) string {
	if indent == "" {
		return body
	}
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, indent)
	}
	return strings.Join(lines, "\n")
}

// missingFile is the error of a file a config names that this machine does not have.
var missingFile = regexp.MustCompile(`open (/[^:]+): no such file or directory`)

// onlyMissingFiles reports whether every line of a load error is a file the block names, by an
// absolute path, that does not exist here (the reader's /etc/ragwatch/...): everything else in
// the block loaded.
func onlyMissingFiles(err error, body string) bool {
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		m := missingFile.FindStringSubmatch(line)
		if m == nil || !strings.Contains(body, m[1]) {
			return false
		}
	}
	return true
}
