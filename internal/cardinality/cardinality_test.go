package cardinality

import "testing"

func TestServiceSetCaps(t *testing.T) {
	s := NewServiceSet(2)
	for _, tc := range []struct{ in, want string }{
		{"a", "a"}, {"b", "b"}, {"c", Other}, {"a", "a"}, {"", Other}, {"b", "b"},
	} {
		if got := s.Label(tc.in); got != tc.want {
			t.Errorf("Label(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := NewServiceSet(5).Label(""); got != "unknown" {
		t.Errorf("empty service = %q, want unknown", got)
	}
}
