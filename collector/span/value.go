package span

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Text returns the value as a string: strings as they are, numbers and bools formatted, and
// structured values as JSON.
func (v Value) Text() string {
	switch v.Type {
	case TypeStr:
		return v.Str()
	case TypeInt:
		return strconv.FormatInt(int64(v.Num()), 10)
	case TypeDouble:
		return strconv.FormatFloat(v.Num(), 'g', -1, 64)
	case TypeBool:
		if v.Num() != 0 {
			return "true"
		}
		return "false"
	case TypeRaw:
		b, err := json.Marshal(v.Raw())
		if err != nil {
			return ""
		}
		return string(b)
	}
	return ""
}

// Number returns the value as a finite number; strings are parsed ("2.0", " 3 ").
func (v Value) Number() (float64, bool) {
	var f float64
	switch v.Type {
	case TypeInt, TypeDouble:
		f = v.Num()
	case TypeStr:
		x, err := strconv.ParseFloat(strings.TrimSpace(v.Str()), 64)
		if err != nil {
			return 0, false
		}
		f = x
	default:
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// Tokens returns a non-negative token count.
func (v Value) Tokens() (int64, bool) {
	f, ok := v.Number()
	if !ok || f < 0 || f > 1e15 {
		return 0, false
	}
	return int64(f), true
}

// Structured returns a structured value: Raw as is, or a string holding JSON decoded. It returns
// nil when there is nothing structured to read.
func (v Value) Structured() any {
	switch v.Type {
	case TypeRaw:
		return v.Raw()
	case TypeStr:
		return ParseJSON(v.Str())
	}
	return nil
}

// ParseJSON decodes s when it looks like a JSON object, array or string; else nil.
func ParseJSON(s string) any {
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[' && t[0] != '"') {
		return nil
	}
	var x any
	if err := json.Unmarshal([]byte(t), &x); err != nil {
		return nil
	}
	return x
}

// AsString returns x when it is a string.
func AsString(x any) string {
	s, _ := x.(string)
	return s
}

// TextOf finds the text inside a structured value: a string as is; for objects the first of
// keys holding text (searched recursively, bounded); for arrays the last element with text.
func TextOf(x any, keys []string, depth int) string {
	if depth > 8 {
		return ""
	}
	switch v := x.(type) {
	case string:
		return v
	case map[string]any:
		for _, k := range keys {
			if e, ok := v[k]; ok {
				if t := TextOf(e, keys, depth+1); t != "" {
					return t
				}
			}
		}
	case []any:
		for i := len(v) - 1; i >= 0; i-- {
			if t := TextOf(v[i], keys, depth+1); t != "" {
				return t
			}
		}
	}
	return ""
}
