package text

import (
	"strings"
	"unicode"
)

// Claims splits s into claims: its sentences (see AppendSentences), each cut further at
// semicolons and clause joints (", and ", ", which ", " – " ...) when both sides hold at least
// three content words as counted by contentWords, so that an invented clause cannot hide among
// supported ones. A nil contentWords counts the words holding a letter or digit. The claims are substrings of s.
// Deciding which claims hold something to verify is left to the caller.
func Claims(s string, contentWords func(string) int) []string {
	if contentWords == nil {
		contentWords = countWords
	}
	var out []string
	for _, sent := range Sentences(s) {
		out = appendClauses(out, sent, contentWords)
	}
	return out
}

// clauseBreaks are the joints where a long sentence is cut into separately verifiable claims.
var clauseBreaks = []string{"; ", ", and ", ", but ", ", while ", ", which ", ", who ", ", whereas ", ", although ", ", as well as ", " – ", " — "}

// appendClauses appends the clauses of sentence s to out. Cutting is linear in s: the content
// words of each segment between joints are counted once.
func appendClauses(out []string, s string, contentWords func(string) int) []string {
	var cuts []int // byte offsets where a new piece may start
	for i := 0; i < len(s); i++ {
		if s[i] != ';' && s[i] != ',' && s[i] != ' ' {
			continue
		}
		for _, sep := range clauseBreaks {
			if strings.HasPrefix(s[i:], sep) {
				cuts = append(cuts, i)
				break
			}
		}
	}
	if len(cuts) == 0 {
		return append(out, s)
	}
	seg := make([]int, len(cuts)+1)
	prev := 0
	for k, cut := range cuts {
		seg[k] = contentWords(s[prev:cut])
		prev = cut
	}
	seg[len(cuts)] = contentWords(s[prev:])
	rest := 0
	for _, n := range seg {
		rest += n
	}
	start, here := 0, 0 // here: content words in s[start:cuts[k]]
	for k, cut := range cuts {
		here += seg[k]
		rest -= seg[k]
		if here >= 3 && rest >= 3 {
			out = append(out, trimClause(s[start:cut]))
			start, here = cut, 0
		}
	}
	return append(out, trimClause(s[start:]))
}

func trimClause(s string) string { return strings.TrimSpace(strings.TrimLeft(s, ";, –—")) }

// countWords counts the words of s that hold a letter or digit.
func countWords(s string) int {
	n := 0
	for _, w := range strings.Fields(s) {
		if strings.IndexFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 {
			n++
		}
	}
	return n
}
