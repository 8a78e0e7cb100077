package facts

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// parseMetadata reads document metadata: a JSON object, a Python dict repr (Pinecone through
// OpenLLMetry), or structured attributes. Anything else is kept as {"raw": s}, never dropped.
func parseMetadata(v span.Value) map[string]any {
	switch v.Type {
	case span.TypeRaw:
		if m, ok := v.Raw().(map[string]any); ok {
			c := make(map[string]any, len(m)) // shallow copy: callers add keys
			for k, e := range m {
				c[k] = e
			}
			return c
		}
		return map[string]any{"raw": v.Raw()}
	case span.TypeStr:
		s := strings.TrimSpace(v.Str())
		if s == "" || s == "{}" || s == "null" || s == "None" {
			return nil
		}
		if s[0] == '{' {
			if fm, ok := parseFlatObject(s); ok {
				return fm
			}
			var m map[string]any // declared here: it escapes to encoding/json
			if err := json.Unmarshal([]byte(s), &m); err == nil {
				return m
			}
			if x, ok := parsePyLiteral(s); ok {
				if m, ok := x.(map[string]any); ok {
					return m
				}
			}
		}
		return map[string]any{"raw": truncate.String(s, 4096)}
	}
	return nil
}

// parsePyLiteral parses a Python literal (dict, list, tuple, str, number, True/False/None) as
// printed by repr(). It is bounded in depth and never panics.
func parsePyLiteral(s string) (any, bool) {
	p := pyParser{s: s}
	v, ok := p.value(0)
	if !ok {
		return nil, false
	}
	p.space()
	return v, p.i == len(p.s)
}

type pyParser struct {
	s string
	i int
}

func (p *pyParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\n' || p.s[p.i] == '\t' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *pyParser) value(depth int) (any, bool) {
	if depth > 64 {
		return nil, false
	}
	p.space()
	if p.i >= len(p.s) {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		p.i++
		m := map[string]any{}
		for {
			p.space()
			if p.i < len(p.s) && p.s[p.i] == '}' {
				p.i++
				return m, true
			}
			k, ok := p.value(depth + 1)
			if !ok {
				return nil, false
			}
			p.space()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return nil, false
			}
			p.i++
			v, ok := p.value(depth + 1)
			if !ok {
				return nil, false
			}
			ks, isStr := k.(string)
			if !isStr {
				b, _ := json.Marshal(k)
				ks = string(b)
			}
			m[ks] = v
			p.space()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
			}
		}
	case c == '[' || c == '(':
		end := byte(']')
		if c == '(' {
			end = ')'
		}
		p.i++
		l := []any{}
		for {
			p.space()
			if p.i < len(p.s) && p.s[p.i] == end {
				p.i++
				return l, true
			}
			v, ok := p.value(depth + 1)
			if !ok {
				return nil, false
			}
			l = append(l, v)
			p.space()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
			}
		}
	case c == '\'' || c == '"':
		return p.str(c)
	default:
		start := p.i
		for p.i < len(p.s) && !strings.ContainsRune(",:}])", rune(p.s[p.i])) && p.s[p.i] != ' ' {
			p.i++
		}
		word := p.s[start:p.i]
		switch word {
		case "True":
			return true, true
		case "False":
			return false, true
		case "None":
			return nil, true
		}
		if n, err := strconv.ParseFloat(word, 64); err == nil && !math.IsInf(n, 0) && !math.IsNaN(n) {
			return n, true
		}
		return nil, false
	}
}

func (p *pyParser) str(q byte) (any, bool) {
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return b.String(), true
		case c == '\\' && p.i+1 < len(p.s):
			p.i++
			switch e := p.s[p.i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			default:
				b.WriteByte(e)
			}
			p.i++
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return nil, false
}

// asNumber returns x as a finite number (JSON numbers, numeric strings).
func asNumber(x any) (float64, bool) {
	switch v := x.(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, false
		}
		return v, true
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	case string:
		return span.Str(v).Number()
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

// valueText reads the text of an input.value / output.value style pair: plain text as is, JSON
// (by mime type or by shape) through TextOf.
func valueText(s, mime string, keys []string) string {
	t := strings.TrimSpace(s)
	if t == "" {
		return ""
	}
	declared := strings.Contains(mime, "json")
	if !declared && (mime != "" || (t[0] != '{' && t[0] != '[')) {
		return s
	}
	x := span.ParseJSON(t)
	if x == nil {
		return s
	}
	if text := span.TextOf(x, keys, 0); text != "" || declared {
		return text
	}
	return s // "[1] see the FAQ" guessed as JSON but holding no text: it was text
}

// parseFlatObject is the fast path for the common metadata shape: one JSON object whose values
// are strings without escapes, numbers, booleans or null. Anything else returns ok=false and the
// caller falls back to encoding/json. Strings share s's memory.
func parseFlatObject(s string) (map[string]any, bool) {
	var m map[string]any
	ok := walkFlatObject(s, func(k string, v flatValue) {
		if m == nil {
			m = make(map[string]any, 4)
		}
		switch v.kind {
		case flatString:
			m[k] = v.str
		case flatNumber:
			m[k] = v.num
		case flatBool:
			m[k] = v.b
		default:
			m[k] = nil
		}
	})
	if !ok {
		return nil, false
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, true
}

// metadataString is span.AsString(parseMetadata(v)[key]) without building the map when v is a
// flat JSON object (parseFlatObject's shape): the last member named key, when it is a string.
func metadataString(v span.Value, key string) string {
	if v.Type == span.TypeStr {
		out := ""
		if walkFlatObject(strings.TrimSpace(v.Str()), func(k string, m flatValue) {
			if k == key {
				out = ""
				if m.kind == flatString {
					out = m.str
				}
			}
		}) {
			return out
		}
	}
	if m := parseMetadata(v); m != nil {
		return span.AsString(m[key])
	}
	return ""
}

// Kinds of flatValue.
const (
	flatNull = iota
	flatString
	flatNumber
	flatBool
)

// flatValue is one member's value of a flat JSON object (walkFlatObject).
type flatValue struct {
	kind uint8
	b    bool
	str  string
	num  float64
}

// walkFlatObject reads s as parseFlatObject does, calling member for each member in order; it
// reports whether s has that shape (members already passed were read all the same).
func walkFlatObject(s string, member func(k string, v flatValue)) bool {
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
			i++
		}
	}
	str := func() (string, bool) {
		if i >= len(s) || s[i] != '"' {
			return "", false
		}
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' || s[j] < 0x20 {
				return "", false
			}
			j++
		}
		if j >= len(s) {
			return "", false
		}
		out := s[i+1 : j]
		if !utf8.ValidString(out) {
			return "", false // encoding/json would replace the bad bytes
		}
		i = j + 1
		return out, true
	}
	skip()
	if i >= len(s) || s[i] != '{' {
		return false
	}
	i++
	skip()
	if i < len(s) && s[i] == '}' {
		i++
		skip()
		return i == len(s)
	}
	for {
		skip()
		k, ok := str()
		if !ok {
			return false
		}
		skip()
		if i >= len(s) || s[i] != ':' {
			return false
		}
		i++
		skip()
		if i >= len(s) {
			return false
		}
		var v flatValue
		switch c := s[i]; {
		case c == '"':
			if v.str, ok = str(); !ok {
				return false
			}
			v.kind = flatString
		case c == 't' && strings.HasPrefix(s[i:], "true"):
			v.kind, v.b = flatBool, true
			i += 4
		case c == 'f' && strings.HasPrefix(s[i:], "false"):
			v.kind = flatBool
			i += 5
		case c == 'n' && strings.HasPrefix(s[i:], "null"):
			i += 4
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(s) && (s[j] == '-' || s[j] == '+' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			f, err := strconv.ParseFloat(s[i:j], 64)
			if err != nil || math.IsInf(f, 0) {
				return false
			}
			v.kind, v.num = flatNumber, f
			i = j
		default:
			return false // nested value: leave it to encoding/json
		}
		member(k, v)
		skip()
		if i >= len(s) {
			return false
		}
		if s[i] == ',' {
			i++
			continue
		}
		if s[i] == '}' {
			i++
			skip()
			return i == len(s)
		}
		return false
	}
}
