package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/ragwatch/ragwatch/internal/fielderr"
)

// Validator is implemented by config structs that check their own fields. Errors should be
// built with Invalid so the walk can prefix the key path and find the line.
type Validator interface {
	Validate() error
}

// FieldError is a problem with one key. Key is relative to the struct that reported it until
// the walk makes it absolute. It is fielderr.Error, so settings types outside config report
// the same way.
type FieldError = fielderr.Error

// Invalid reports a problem with the key (relative to the validating struct).
func Invalid(key, format string, args ...any) error { return fielderr.Invalid(key, format, args...) }

// Load reads a config file. An empty path returns the defaults.
func Load(path string) (*Config, error) {
	if path == "" {
		c := Default()
		return c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML over the defaults, rejects unknown keys, resolves secrets and validates.
// The error lists every problem found, one per line.
func Parse(data []byte) (*Config, error) {
	c := Default()
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return c, c.validate(nil)
		}
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	lines := map[string]int{}
	var errs []error
	if len(root.Content) > 0 {
		doc := root.Content[0]
		if doc.Kind != yaml.MappingNode && !(doc.Kind == yaml.ScalarNode && doc.Tag == "!!null") {
			return nil, errors.New("line 1: the config must be a YAML mapping")
		}
		errs = append(errs, checkKeys(doc, reflect.TypeOf(*c), "", lines)...)
		if len(errs) == 0 {
			if err := root.Decode(c); err != nil {
				errs = append(errs, typeErrors(err, lines)...)
			}
		}
	}
	if len(errs) > 0 {
		return nil, joinSorted(errs)
	}
	c.Assembly.followWait(func(key string) bool { _, ok := lines[key]; return ok })
	_, slosGiven := lines["slos"]
	c.pruneDefaultSLOs(slosGiven)
	if err := c.validate(lines); err != nil {
		return nil, err
	}
	return c, nil
}

// validate walks the struct tree calling Validate on every Validator and prefixes key paths.
func (c *Config) validate(lines map[string]int) error {
	var errs []error
	walk(reflect.ValueOf(c).Elem(), "", func(path string, v Validator) {
		err := v.Validate()
		if err == nil {
			return
		}
		for _, e := range flatten(err) {
			var fe *FieldError
			if errors.As(e, &fe) {
				key := joinPath(path, fe.Key)
				errs = append(errs, &FieldError{Key: key, Line: lookupLine(lines, key), Msg: fe.Msg})
				continue
			}
			key := path
			if key == "" {
				key = "(root)"
			}
			errs = append(errs, &FieldError{Key: key, Line: lookupLine(lines, path), Msg: e.Error()})
		}
	})
	// Checks across sections: names that refer to each other (alerts.go), stream caps against
	// the embedded server's store (storage.go), the app's subjects against ragwatch's own
	// (nats.go).
	if err := errors.Join(CheckAlertRefs(c), CheckStorage(c), CheckJudges(c), CheckMetricNames(c), CheckNATSSubjects(c)); err != nil {
		for _, e := range flatten(err) {
			var fe *FieldError
			if errors.As(e, &fe) {
				errs = append(errs, &FieldError{Key: fe.Key, Line: lookupLine(lines, fe.Key), Msg: fe.Msg})
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return joinSorted(errs)
}

func walk(v reflect.Value, path string, visit func(string, Validator)) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name := yamlName(f)
			if name == "-" {
				continue
			}
			if strings.Contains(f.Tag.Get("yaml"), ",inline") {
				walk(v.Field(i), path, visit)
				continue
			}
			walk(v.Field(i), joinPath(path, name), visit)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i), visit)
		}
	}
	if v.CanAddr() {
		if val, ok := v.Addr().Interface().(Validator); ok {
			visit(path, val)
			return
		}
	}
	if v.CanInterface() {
		if val, ok := v.Interface().(Validator); ok {
			visit(path, val)
		}
	}
}

// checkKeys rejects keys that no field takes and records the line of every key path.
func checkKeys(n *yaml.Node, t reflect.Type, path string, lines map[string]int) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var errs []error
	switch n.Kind {
	case yaml.MappingNode:
		if t.Kind() == reflect.Map {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := joinPath(path, n.Content[i].Value)
				lines[k] = n.Content[i].Line
				errs = append(errs, checkKeys(n.Content[i+1], t.Elem(), k, lines)...)
			}
			return errs
		}
		if t.Kind() != reflect.Struct || t == reflect.TypeOf(time.Time{}) {
			return nil // the decoder reports the type mismatch
		}
		fields := structFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			k := joinPath(path, key.Value)
			lines[k] = key.Line
			ft, ok := fields[key.Value]
			if !ok {
				errs = append(errs, &FieldError{Key: k, Line: key.Line, Msg: "is not a known key" + suggest(key.Value, fields)})
				continue
			}
			errs = append(errs, checkKeys(n.Content[i+1], ft, k, lines)...)
		}
	case yaml.ScalarNode:
		if t == durationType {
			if err := checkDuration(n); err != nil {
				errs = append(errs, &FieldError{Key: path, Line: n.Line, Msg: err.Error()})
			}
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil
		}
		for i, item := range n.Content {
			k := fmt.Sprintf("%s[%d]", path, i)
			lines[k] = item.Line
			errs = append(errs, checkKeys(item, t.Elem(), k, lines)...)
		}
	}
	return errs
}

func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if strings.Contains(tag, ",inline") {
			for k, v := range structFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name := yamlName(f); name != "-" {
			out[name] = f.Type
		}
	}
	return out
}

func yamlName(f reflect.StructField) string {
	tag := f.Tag.Get("yaml")
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

func suggest(key string, fields map[string]reflect.Type) string {
	return "; expected one of: " + strings.Join(slices.Sorted(maps.Keys(fields)), ", ")
}

// typeErrors turns the decoder's messages into one error per problem. yaml.v3 already says
// "line N: cannot unmarshal !!str `sk-live-...` into int"; we keep those words but not the
// quoted value: a value of the wrong type is often a secret pasted in the wrong place (a key
// where its section or its password_env belongs), and errors are logged and shown in CI. The
// key and the line say which value it is.
func typeErrors(err error, lines map[string]int) []error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return []error{err}
	}
	out := make([]error, 0, len(te.Errors))
	for _, m := range te.Errors {
		m = quotedValue.ReplaceAllString(m, "$1 into ")
		line := lineOf(errors.New(m))
		key := ""
		for k, l := range lines {
			if l == line && len(k) > len(key) {
				key = k
			}
		}
		if key == "" {
			out = append(out, errors.New(m))
			continue
		}
		_, msg, _ := strings.Cut(m, ": ")
		msg = strings.Replace(msg, "cannot unmarshal", "cannot decode", 1)
		out = append(out, &FieldError{Key: key, Line: line, Msg: msg})
	}
	return out
}

// quotedValue is the value yaml.v3 quotes after its tag in a type error.
var quotedValue = regexp.MustCompile("(!![a-z]+) `.*` into ")

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func joinPath(prefix, key string) string {
	switch {
	case prefix == "":
		return key
	case key == "":
		return prefix
	case strings.HasPrefix(key, "["):
		return prefix + key
	}
	return prefix + "." + key
}

func lookupLine(lines map[string]int, key string) int {
	for key != "" {
		if l, ok := lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

// joinSorted orders problems by line so the output reads top to bottom.
func joinSorted(errs []error) error {
	sort.SliceStable(errs, func(i, j int) bool { return lineOf(errs[i]) < lineOf(errs[j]) })
	return errors.Join(errs...)
}

func lineOf(err error) int {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Line
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				return n
			}
		}
	}
	return 1 << 30
}

var durationType = reflect.TypeOf(model.Duration(0))

// checkDuration checks a model.Duration value here, where the key and line are known: the
// decoder would report its error without either. Prometheus durations ("90s", "1h30m", "7d",
// "1w") are taken as written. Go durations that Prometheus's syntax cannot spell ("1.5h") were
// valid in these keys before they took day units, so they are rewritten to the same value in
// Prometheus's syntax; only sub-millisecond precision has no spelling and is refused.
func checkDuration(n *yaml.Node) error {
	if n.Tag == "!!null" {
		return nil
	}
	if _, err := model.ParseDuration(n.Value); err == nil {
		return nil
	}
	d, err := time.ParseDuration(n.Value)
	switch {
	case err == nil && d < 0:
		return fmt.Errorf("must not be negative, got %q", n.Value)
	case err == nil && d%time.Millisecond == 0:
		n.Value, n.Tag = model.Duration(d).String(), "!!str"
		return nil
	}
	return fmt.Errorf("must be a duration such as 90s, 15m, 1h30m, 7d or 1w, got %q", n.Value)
}
