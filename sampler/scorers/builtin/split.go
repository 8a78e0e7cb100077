package builtin

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// SplitClaims splits text into claims: sentences, list items and semicolon-separated clauses.
// A full stop does not end a sentence after a title (Dr., Mr.), an initial (J. K. Rowling),
// inside a number (3.5) or inside a dotted abbreviation (U.S., e.g.); an ambiguous abbreviation
// (Inc., U.S., etc.) ends a sentence only when the next word opens one ("The", "It"...).
// Claims without a content word ("Sure!", "I think so.") are dropped: there is nothing to verify.
func SplitClaims(text string) []string {
	var out []string
	for _, s := range splitSentences(text) {
		for _, c := range splitClauses(s) {
			if hasContent(c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// splitSentences splits text into sentences and list items, keeping content words only in the
// decision of what to keep to the caller.
func splitSentences(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(stripListMarker(strings.TrimSpace(line)))
		if line == "" {
			continue
		}
		start := 0
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c != '.' && c != '!' && c != '?' {
				continue
			}
			// Swallow closing quotes, brackets and repeated stops: `done."`, `really?!`.
			j := i + 1
			for j < len(line) && strings.IndexByte(".!?\"')]”’", line[j]) >= 0 {
				if line[j] == ']' || line[j] == ')' {
					break
				}
				j++
			}
			if j < len(line) && line[j] != ' ' && line[j] != '\t' {
				continue // 3.5, U.S.A, e.g.x, example.com
			}
			if c == '.' && !endsSentence(line[start:i], line[j:]) {
				continue
			}
			if s := strings.TrimSpace(line[start:j]); s != "" {
				out = append(out, s)
			}
			start = j
			i = j - 1
		}
		if s := strings.TrimSpace(line[start:]); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// endsSentence decides whether a full stop after before (the sentence so far) followed by after
// ends the sentence.
func endsSentence(before, after string) bool {
	word := lastWord(before)
	next := firstWord(after)
	if next == "" {
		return true
	}
	lw := strings.ToLower(strings.TrimLeft(word, "(\"'“"))
	if titles[lw] {
		return false
	}
	r, _ := utf8.DecodeRuneInString(word)
	if utf8.RuneCountInString(word) == 1 && unicode.IsUpper(r) {
		return false // an initial: J. K. Rowling
	}
	if ambiguousAbbrev[lw] || strings.Contains(word, ".") {
		// U.S. / Inc. / etc.: a sentence ends only if the next word typically opens one.
		opener := strings.Trim(next, "\"'“")
		r, _ := utf8.DecodeRuneInString(opener)
		return unicode.IsUpper(r) && sentenceOpeners[strings.ToLower(opener)]
	}
	nr, _ := utf8.DecodeRuneInString(next)
	if unicode.IsLower(nr) && (lw == "no" || lw == "vol" || lw == "fig" || lw == "approx") {
		return false
	}
	return true
}

func lastWord(s string) string {
	s = strings.TrimRight(s, " ")
	if k := strings.LastIndexAny(s, " \t"); k >= 0 {
		return s[k+1:]
	}
	return s
}

func firstWord(s string) string {
	s = strings.TrimLeft(s, " \t")
	if k := strings.IndexAny(s, " \t"); k >= 0 {
		return s[:k]
	}
	return s
}

var titles = set("mr", "mrs", "ms", "dr", "prof", "sen", "rep", "gov", "gen", "lt", "col",
	"capt", "sgt", "rev", "st", "mt", "ft", "hon", "pres", "messrs", "mme", "mlle", "vs", "v",
	"approx", "dept", "est", "fig", "no", "nos", "vol", "pp", "cf", "ca", "al")

var ambiguousAbbrev = set("inc", "ltd", "co", "corp", "jr", "sr", "etc", "bros", "llc", "plc",
	"jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "a.m",
	"p.m", "am", "pm")

// sentenceOpeners are words that, capitalised after an ambiguous abbreviation, start a new
// sentence ("... Acme Inc. The firm grew.").
var sentenceOpeners = set("the", "a", "an", "it", "he", "she", "they", "we", "i", "this",
	"these", "those", "there", "his", "her", "their", "its", "but", "however", "also",
	"meanwhile", "according", "you", "our", "my", "then", "yet")

// stripListMarker removes a leading bullet or enumeration: "- ", "* ", "• ", "1. ", "2) ", "a) ".
func stripListMarker(line string) string {
	if line == "" {
		return line
	}
	for _, b := range []string{"- ", "* ", "• ", "– ", "— ", "+ "} {
		if strings.HasPrefix(line, b) {
			return line[len(b):]
		}
	}
	i := 0
	for i < len(line) && i < 3 && isDigitByte(line[i]) {
		i++
	}
	if i == 0 && len(line) > 2 && line[0] >= 'a' && line[0] <= 'z' && line[1] == ')' {
		i = 1
	}
	if i > 0 && i+1 < len(line) && (line[i] == '.' || line[i] == ')') && line[i+1] == ' ' {
		return line[i+2:]
	}
	return line
}

// clauseBreaks are the joints where a long sentence is cut into separately verifiable claims.
var clauseBreaks = []string{"; ", ", and ", ", but ", ", while ", ", which ", ", who ", ", whereas ", ", although ", ", as well as ", " – ", " — "}

// splitClauses cuts a sentence at semicolons and clause joints (", and ", ", which "...) when
// both sides hold at least three content words, so that a hallucinated clause cannot hide
// among supported ones. The pieces are substrings of s.
func splitClauses(s string) []string {
	var cuts []int // byte offsets where a new piece starts
	for i := 0; i < len(s); i++ {
		for _, sep := range clauseBreaks {
			if strings.HasPrefix(s[i:], sep) {
				cuts = append(cuts, i)
				break
			}
		}
	}
	if len(cuts) == 0 {
		return []string{s}
	}
	// Content words per segment between cuts, counted once: cutting is linear in s.
	seg := make([]int, len(cuts)+1)
	prev := 0
	for k, cut := range cuts {
		seg[k] = contentCount(s[prev:cut])
		prev = cut
	}
	seg[len(cuts)] = contentCount(s[prev:])
	rest := 0
	for _, n := range seg {
		rest += n
	}
	var out []string
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

// hasContent reports whether s says something about the world: a content word that is not a
// meta word, or a number outside a meta statement ("2009." is a claim; "Here is a summary of the
// article in 89 words:" and "Sure!" are about the answer itself and hold nothing to verify). A
// preface — a piece that ends with a colon and holds a meta word ("Here is a summary of the
// news in 63 words or less:") — introduces the answer and is not a claim either.
func hasContent(s string) bool {
	num, meta, content := false, false, false
	for _, t := range tokenize(s) {
		switch {
		case t.num:
			num = true
		case t.meta:
			meta = true
		case !t.stop:
			content = true
		}
	}
	if meta && strings.HasSuffix(strings.TrimSpace(s), ":") {
		return false
	}
	return content || (num && !meta)
}

// metaWords refer to the answer or its sources rather than to the world.
var metaWords = set("summary", "summaries", "summarize", "summarise", "summarized", "summarised",
	"article", "articles", "passage", "passages", "text", "document", "documents", "context",
	"source", "sources", "excerpt", "words", "word", "here", "sure", "provided", "following",
	"below", "response", "answer", "question", "based", "brief", "briefly", "concise")

func contentCount(s string) int {
	n := 0
	for _, t := range tokenize(s) {
		if !t.stop || t.num {
			n++
		}
	}
	return n
}

// stripMarkers removes citation markers ([1], [2, 3], [doc-id]) so they neither count as numbers
// nor as words of a claim.
func stripMarkers(s string, isID func(string) bool) string {
	if strings.IndexByte(s, '[') < 0 {
		return s
	}
	var b strings.Builder
	rest := s
	for {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			b.WriteString(rest)
			break
		}
		end := strings.IndexByte(rest[open:], ']')
		if end < 0 {
			b.WriteString(rest)
			break
		}
		inner := rest[open+1 : open+end]
		if isMarker(inner, isID) {
			b.WriteString(strings.TrimRight(rest[:open], " "))
		} else {
			b.WriteString(rest[:open+end+1])
		}
		rest = rest[open+end+1:]
	}
	return b.String()
}

func isMarker(inner string, isID func(string) bool) bool {
	if strings.TrimSpace(inner) == "" || len(inner) > 256 {
		return false
	}
	for _, p := range strings.Split(inner, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			return false
		}
		if isID != nil && isID(p) {
			continue
		}
		for k := 0; k < len(p); k++ {
			if !isDigitByte(p[k]) {
				return false
			}
		}
	}
	return true
}
