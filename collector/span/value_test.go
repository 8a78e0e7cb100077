package span

import (
	"math"
	"testing"
	"unsafe"
)

// TestValueFields checks the compact Value: each constructor's value comes back from its own
// accessor and reads as the zero value from the others, whatever the shared words hold.
func TestValueFields(t *testing.T) {
	if got := unsafe.Sizeof(Attr{}); got != 40 {
		t.Errorf("an Attr is %d bytes, want 40", got)
	}
	raw := map[string]any{"k": []any{"v", 1.5}}
	for _, tc := range []struct {
		v      Value
		typ    ValueType
		str    string
		num    float64
		raw    any
		goSyn  string
		text   string
		differ Value // same type, another value
	}{
		{Str("héllo"), TypeStr, "héllo", 0, nil, `assemble.Str("héllo")`, "héllo", Str("hello")},
		{Str(""), TypeStr, "", 0, nil, `assemble.Str("")`, "", Str(" ")},
		{Int(-42), TypeInt, "", -42, nil, "assemble.Int(-42)", "-42", Int(42)},
		{Double(0.25), TypeDouble, "", 0.25, nil, "assemble.Double(0.25)", "0.25", Double(0.5)},
		{Bool(true), TypeBool, "", 1, nil, "assemble.Bool(true)", "true", Bool(false)},
		{Raw(raw), TypeRaw, "", 0, raw, `assemble.Raw(map[string]interface {}{"k":[]interface {}{"v", 1.5}})`, `{"k":["v",1.5]}`, Raw(map[string]any{"k": "v"})},
		{Value{}, TypeEmpty, "", 0, nil, "assemble.Value{}", "", Str("")},
	} {
		v := tc.v
		if v.Type != tc.typ || v.Str() != tc.str || v.Num() != tc.num {
			t.Errorf("%#v: type %d, Str %q, Num %v; want %d, %q, %v", v, v.Type, v.Str(), v.Num(), tc.typ, tc.str, tc.num)
		}
		if (v.Raw() == nil) != (tc.raw == nil) || tc.raw != nil && !v.Equal(Raw(tc.raw)) {
			t.Errorf("%#v: Raw %v, want %v", v, v.Raw(), tc.raw)
		}
		if got := v.GoString(); got != tc.goSyn {
			t.Errorf("GoString = %s, want %s", got, tc.goSyn)
		}
		if got := v.Text(); got != tc.text {
			t.Errorf("%#v: Text %q, want %q", v, got, tc.text)
		}
		if !v.Equal(v) || v.Equal(tc.differ) || tc.differ.Equal(v) {
			t.Errorf("%#v: Equal itself %v, Equal %#v %v", v, v.Equal(v), tc.differ, v.Equal(tc.differ))
		}
	}
	// A string's length shares its word with a number's bits: neither reads as the other.
	if s := Str(string(make([]byte, 3))); s.Num() != 0 || Int(3).Str() != "" {
		t.Errorf("Str(3 bytes).Num() = %v, Int(3).Str() = %q", s.Num(), Int(3).Str())
	}
	if n := Double(math.NaN()); !n.Equal(n) || n.Equal(Double(0)) {
		t.Error("a NaN is not equal to itself bit for bit")
	}
	if (Value{Type: TypeRaw}).Raw() != nil || (Value{Type: TypeStr}).Str() != "" {
		t.Error("a Value built by hand without its content does not read as empty")
	}
	if Int(1).Equal(Double(1)) || Bool(true).Equal(Int(1)) {
		t.Error("values of different types compare equal")
	}
}

func TestContentText(t *testing.T) {
	for in, want := range map[string]string{
		`[{"type":"text","text":"a"},{"type":"image_url","image_url":{}},{"type":"text","text":"b"}]`: "a\nb",
		`[1] is the answer [2]`: `[1] is the answer [2]`,
		`[1, 2]`:                `[1, 2]`,
		`[{"no":"type"}]`:       `[{"no":"type"}]`,
		`plain`:                 `plain`,
	} {
		if got := contentText(Str(in)); got != want {
			t.Errorf("contentText(%q) = %q, want %q", in, got, want)
		}
	}
}
