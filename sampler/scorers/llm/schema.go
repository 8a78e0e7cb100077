package llm

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Schema is a JSON Schema document (the subset structured outputs accept: object, array,
// string, integer, number, boolean, properties, required, additionalProperties, items,
// minItems, maxItems, enum, minimum, maximum). The same value is sent to the model and used
// to validate its reply, so a verdict is never trusted because the vendor promised the shape.
type Schema map[string]any

// Validate checks a decoded JSON value (from encoding/json into any) against the schema and
// returns the first problem, naming its path.
func (s Schema) Validate(v any) error { return validate(map[string]any(s), v, "$") }

func validate(s map[string]any, v any, path string) error {
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return e == v }) {
		return fmt.Errorf("%s: %v is not one of %v", path, v, enum)
	}
	switch s["type"] {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object", path)
		}
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := obj[r.(string)]; !ok {
					return fmt.Errorf("%s: missing %q", path, r)
				}
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					return fmt.Errorf("%s: unexpected key %q", path, k)
				}
				continue
			}
			if err := validate(ps, obj[k], path+"."+k); err != nil {
				return err
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want an array", path)
		}
		if n, ok := num(s["minItems"]); ok && float64(len(arr)) < n {
			return fmt.Errorf("%s: %d items, want at least %v", path, len(arr), n)
		}
		if n, ok := num(s["maxItems"]); ok && float64(len(arr)) > n {
			return fmt.Errorf("%s: %d items, want at most %v", path, len(arr), n)
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range arr {
				if err := validate(items, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: want a string", path)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want true or false", path)
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: want a number", path)
		}
		if s["type"] == "integer" && f != math.Trunc(f) {
			return fmt.Errorf("%s: %v is not an integer", path, f)
		}
		if n, ok := num(s["minimum"]); ok && f < n {
			return fmt.Errorf("%s: %v is below the minimum %v", path, f, n)
		}
		if n, ok := num(s["maximum"]); ok && f > n {
			return fmt.Errorf("%s: %v is above the maximum %v", path, f, n)
		}
	}
	return nil
}

func num(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// Helpers to write schemas compactly. Every object is closed (additionalProperties false)
// and requires all its properties, as strict structured outputs demand.
func object(props map[string]any) Schema {
	req := make([]any, 0, len(props))
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		req = append(req, k)
	}
	return Schema{"type": "object", "properties": props, "required": req, "additionalProperties": false}
}

func arrayOf(items map[string]any, minItems, maxItems int) map[string]any {
	return map[string]any{"type": "array", "items": items, "minItems": minItems, "maxItems": maxItems}
}

func str() map[string]any     { return map[string]any{"type": "string"} }
func boolean() map[string]any { return map[string]any{"type": "boolean"} }
func integer(min, max int) map[string]any {
	return map[string]any{"type": "integer", "minimum": min, "maximum": max}
}
func enum(vals ...string) map[string]any {
	e := make([]any, len(vals))
	for i, v := range vals {
		e[i] = v
	}
	return map[string]any{"type": "string", "enum": e}
}

// Wire returns the schema as sent to a vendor: the same shape without the numeric and size
// constraints (minimum, maximum, minItems, maxItems) that some structured-output
// implementations reject. The prompt states the ranges and Validate enforces them.
func (s Schema) Wire() Schema { return strip(map[string]any(s)) }

func strip(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch k {
		case "minimum", "maximum", "minItems", "maxItems":
			continue
		}
		switch x := v.(type) {
		case map[string]any:
			if k == "properties" {
				props := make(map[string]any, len(x))
				for pk, pv := range x {
					if pm, ok := pv.(map[string]any); ok {
						props[pk] = strip(pm)
					} else {
						props[pk] = pv
					}
				}
				out[k] = props
				continue
			}
			out[k] = strip(x)
		case Schema:
			out[k] = strip(x)
		default:
			out[k] = v
		}
	}
	return out
}
