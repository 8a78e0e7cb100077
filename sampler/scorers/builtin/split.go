package builtin

import (
	"strings"

	"github.com/ragwatch/ragwatch/internal/text"
)

// SplitClaims splits text into claims with internal/text's sentence and clause rules (see
// text.Claims), clause joints weighed by content words. Claims without a content word ("Sure!",
// "I think so.") are dropped: there is nothing to verify.
func SplitClaims(s string) []string {
	var out []string
	for _, c := range text.Claims(s, contentCount) {
		if hasContent(c) {
			out = append(out, c)
		}
	}
	return out
}

// hasContent reports whether s says something about the world: a content word that is not a
// meta word, or a number outside a meta statement ("2009." is a claim; "Here is a summary of the
// article in 89 words:" and "Sure!" are about the answer itself and hold nothing to verify). A
// preface — a piece that ends with a colon and holds a meta word ("Here is a summary of the
// news in 63 words or less:") — introduces the answer and is not a claim either.
func hasContent(s string) bool {
	num, meta, content := false, false, false
	for t := range eachToken(s) {
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
	for t := range eachToken(s) {
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
