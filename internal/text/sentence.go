package text

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sentences returns the sentences of s, each trimmed of white space; see AppendSentences.
func Sentences(s string) []string { return AppendSentences(nil, s) }

// AppendSentences appends the sentences of s to dst and returns it. The sentences are
// substrings of s, so the only allocation is dst's growth.
//
// A newline always ends a sentence, and a list marker opening a line ("- ", "* ", "• ", "1. ",
// "2) ", "a) ") is dropped. Inside a line a sentence ends at '.', '!', '?' or an ellipsis ("...",
// "…") followed by white space or the end of the line; the stop keeps the closing quotes and
// brackets and the further stops right after it (`done."`, `really?!`, `(see above.)`), and the
// citation markers that trail it (`It rises. [1]`). A full stop does not end a sentence inside a
// number or a name (3.5, U.S.A, example.com), after a title or an initial (Dr. Smith, e.g. tea,
// J. K. Rowling), or after a reference word before a number or a lower-case word (No. 5, fig. 3,
// but "The answer is no. It closed." is two); after an ambiguous abbreviation (Inc., etc., U.S.)
// it ends one only when a sentence opener follows ("... Acme Inc. The firm grew."). An ellipsis
// followed by a lower-case word does not end a sentence. The abbreviations are in one list.
func AppendSentences(dst []string, s string) []string {
	for len(s) > 0 {
		line := s
		if k := strings.IndexByte(s, '\n'); k >= 0 {
			line, s = s[:k], s[k+1:]
		} else {
			s = ""
		}
		dst = appendLine(dst, strings.TrimSpace(stripListMarker(strings.TrimSpace(line))))
	}
	return dst
}

// appendLine appends the sentences of one line (no newline in it).
func appendLine(dst []string, line string) []string {
	start := 0
	for i := 0; i < len(line); i++ {
		if !stopStart[line[i]] {
			continue // one load and a branch that is rarely taken, for most bytes
		}
		n := stopLen(line, i)
		if n == 0 {
			continue
		}
		j := skipMarkers(line, skipClosers(line, i+n))
		if !endsAt(line, start, i, n, j) {
			i = j - 1 // the stop and its closers are one decision: "so on...." is one ellipsis
			continue
		}
		if sent := strings.TrimSpace(line[start:j]); sent != "" {
			dst = append(dst, sent)
		}
		start = j
		i = j - 1
	}
	if sent := strings.TrimSpace(line[start:]); sent != "" {
		dst = append(dst, sent)
	}
	return dst
}

// endsAt reports whether the stop line[i:i+n], with its closers and markers up to j, ends the
// sentence that started at line[start].
func endsAt(line string, start, i, n, j int) bool {
	if j < len(line) && !spaceAt(line, j) {
		return false // 3.5, U.S.A, e.g.x, example.com
	}
	next := firstWord(line[j:])
	if n == len("…") || strings.HasPrefix(line[i:], "...") {
		r, _ := utf8.DecodeRuneInString(next)
		return !unicode.IsLower(r) // "and so on... and then" is one sentence
	}
	return line[i] != '.' || endsSentence(line[start:i], next)
}

// stopStart holds the bytes a sentence stop starts with (stopLen).
var stopStart = [256]bool{'.': true, '!': true, '?': true, 0xE2: true} // 0xE2 starts "…"

// stopLen is the length of the sentence stop at line[i] ('.', '!', '?' or '…'), 0 for none.
func stopLen(line string, i int) int {
	switch line[i] {
	case '.', '!', '?':
		return 1
	case 0xE2:
		if strings.HasPrefix(line[i:], "…") {
			return len("…")
		}
	}
	return 0
}

// closers may follow a stop and still belong to its sentence: further stops, closing quotes
// and brackets.
var closers = []string{".", "!", "?", "…", `"`, "'", ")", "]", "”", "’", "»"}

// skipClosers returns the index after the closers that start at line[j:].
func skipClosers(line string, j int) int {
	for j < len(line) {
		found := false
		for _, c := range closers {
			if strings.HasPrefix(line[j:], c) {
				if c == "]" || c == "'" || c == "’" {
					// Only a closing one (`rose.']`), not the start of more text (`the U.S.'s`).
					if j+len(c) < len(line) && !spaceAt(line, j+len(c)) && stopLen(line, j+len(c)) == 0 {
						return j
					}
				}
				j += len(c)
				found = true
				break
			}
		}
		if !found {
			return j
		}
	}
	return j
}

// skipMarkers returns the index after the citation markers ("[1]", " [2, 3]", " [doc-id]") that
// trail a stop at line[j:], or j when none does.
func skipMarkers(line string, j int) int {
	for j < len(line) {
		k := j
		for k < len(line) && (line[k] == ' ' || line[k] == '\t') {
			k++
		}
		if k == len(line) || line[k] != '[' {
			return j
		}
		end := strings.IndexByte(line[k:], ']')
		if end < 0 || !markerShaped(line[k+1:k+end]) {
			return j
		}
		j = k + end + 1
	}
	return j
}

// markerShaped reports whether inner, the text between brackets, has the shape of a citation
// marker: a comma-separated list of items, each without white space inside ("1", "2, 3",
// "doc-id"). Whether the items resolve to documents is the caller's business.
func markerShaped(inner string) bool {
	if len(inner) > 256 {
		return false
	}
	for more := true; more; {
		var item string
		item, inner, more = strings.Cut(inner, ",")
		item = strings.TrimSpace(item)
		if item == "" || strings.IndexFunc(item, unicode.IsSpace) >= 0 {
			return false
		}
	}
	return true
}

// endsSentence decides whether a full stop after before (the sentence so far) followed by the
// word next ends the sentence.
func endsSentence(before, next string) bool {
	if next == "" {
		return true
	}
	word := strings.TrimLeft(lastWord(before), "([\"'“‘")
	switch lookup(word) {
	case continues:
		return false
	case ambiguous:
		return opensSentence(next)
	case numbering:
		r, _ := utf8.DecodeRuneInString(next)
		return !unicode.IsDigit(r) && !unicode.IsLower(r)
	}
	if r, size := utf8.DecodeRuneInString(word); size == len(word) && unicode.IsUpper(r) {
		return false // an initial: J. K. Rowling
	}
	if isDotted(word) {
		return opensSentence(next) // U.S., Ph.D.
	}
	return true
}

// opensSentence reports whether next, the word after an ambiguous abbreviation, is a
// capitalised sentence opener.
func opensSentence(next string) bool {
	next = strings.Trim(next, "\"'“‘")
	r, _ := utf8.DecodeRuneInString(next)
	return unicode.IsUpper(r) && isOpener(next)
}

func lastWord(s string) string {
	s = strings.TrimRightFunc(s, unicode.IsSpace)
	if k := strings.LastIndexAny(s, " \t"); k >= 0 {
		return s[k+1:]
	}
	return s
}

func firstWord(s string) string {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	if k := strings.IndexAny(s, " \t"); k >= 0 {
		return s[:k]
	}
	return s
}

// spaceAt reports whether a white space character starts at s[i].
func spaceAt(s string, i int) bool {
	if c := s[i]; c < utf8.RuneSelf {
		return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r)
}

// stripListMarker removes a leading bullet or enumeration: "- ", "* ", "• ", "1. ", "2) ", "a) ".
func stripListMarker(line string) string {
	for _, b := range []string{"- ", "* ", "• ", "– ", "— ", "+ "} {
		if strings.HasPrefix(line, b) {
			return line[len(b):]
		}
	}
	i := 0
	for i < len(line) && i < 3 && '0' <= line[i] && line[i] <= '9' {
		i++
	}
	if i == 0 && len(line) > 2 && 'a' <= line[0] && line[0] <= 'z' && line[1] == ')' {
		i = 1
	}
	if i > 0 && i+1 < len(line) && (line[i] == '.' || line[i] == ')') && line[i+1] == ' ' {
		return line[i+2:]
	}
	return line
}
