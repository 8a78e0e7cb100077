package truncate

import "unicode/utf8"

// String returns s cut to at most n bytes. The cut falls on a rune boundary, so valid UTF-8
// stays valid (the result may be up to 3 bytes shorter than n). n <= 0 gives "".
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	// Back up over at most UTFMax-1 continuation bytes: a longer run is invalid UTF-8 anyway
	// and is cut like single bytes.
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return s[:n]
}

// Ellipsis is String followed by "..." when s was cut, for messages that quote input.
func Ellipsis(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return String(s, n) + "..."
}
