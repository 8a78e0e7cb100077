package record

import (
	"strconv"
	"strings"

	"github.com/ragwatch/ragwatch/internal/text"
)

// ParseCitations extracts citations from an answer that did not carry them explicitly. A marker
// is a bracketed list: `[1]`, `[2,3]` or `[2, 3]` are 1-based positions in docs; `[doc-id]` is
// a document id. Each sentence (as internal/text splits them) holding markers gives one
// citation: the sentence without its markers as the claim, and the cited document ids in order of first mention. Markers that
// resolve to no document are ignored, so `[sic]` or a number past the list cite nothing.
func ParseCitations(answer string, docs []Document) []Citation {
	if strings.IndexByte(answer, '[') < 0 {
		return nil
	}
	var out []Citation
	var sentences [16]string
	var claimBuf [256]byte
	for _, sentence := range text.AppendSentences(sentences[:0], answer) {
		if strings.IndexByte(sentence, '[') < 0 {
			continue // no marker: no citation
		}
		var ids []string
		claim := claimBuf[:0]
		rest := sentence
		for {
			open := strings.IndexByte(rest, '[')
			if open < 0 {
				claim = append(claim, rest...)
				break
			}
			end := strings.IndexByte(rest[open:], ']')
			if end < 0 {
				claim = append(claim, rest...)
				break
			}
			inner := rest[open+1 : open+end]
			var marker [8]string
			resolved := resolveMarker(inner, docs, marker[:0])
			if resolved == nil {
				claim = append(claim, rest[:open+end+1]...)
			} else {
				claim = append(claim, rest[:open]...)
				for _, id := range resolved {
					ids = appendUnique(ids, id)
				}
			}
			rest = rest[open+end+1:]
		}
		if len(ids) == 0 {
			continue
		}
		out = append(out, Citation{Text: cleanClaim(claim), DocumentIDs: ids})
	}
	return out
}

// cleanClaim is strings.TrimSpace(punctuationSpace.Replace(strings.Join(strings.Fields(claim),
// " "))) in one pass and one allocation for ASCII text: white space runs become one space, none
// at the ends, and none before punctuation.
func cleanClaim(claim []byte) string {
	for _, c := range claim {
		if c >= 0x80 {
			text := strings.Join(strings.Fields(string(claim)), " ")
			return strings.TrimSpace(punctuationSpace.Replace(text))
		}
	}
	var buf [256]byte
	out := buf[:0]
	space := false
	for _, c := range claim {
		switch c {
		case ' ', '\t', '\n', '\v', '\f', '\r':
			space = len(out) > 0
			continue
		case '.', '!', '?', ',', ';', ':':
			space = false // the gap a removed marker leaves ("days [1]." → "days.")
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, c)
	}
	return string(out)
}

// punctuationSpace closes the gap a removed marker leaves before punctuation ("days [1]." →
// "days."); cleanClaim's path for non-ASCII text.
var punctuationSpace = strings.NewReplacer(" .", ".", " !", "!", " ?", "?", " ,", ",", " ;", ";", " :", ":")

// resolveMarker returns the document ids a marker's inner text cites, or nil when it is not a
// citation marker.
// The ids are appended to ids (a caller's buffer).
func resolveMarker(inner string, docs []Document, ids []string) []string {
	inner = strings.TrimSpace(inner)
	if inner == "" || len(inner) > 256 {
		return nil
	}
	for more := true; more; {
		var p string
		p, inner, more = strings.Cut(inner, ",")
		p = strings.TrimSpace(p)
		if p == "" {
			return nil
		}
		if id, ok := matchDocID(p, docs); ok {
			ids = append(ids, id)
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil // not a marker: ordinary bracketed text
		}
		if n >= 1 && n <= len(docs) {
			ids = append(ids, docs[n-1].ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return ids
}

func matchDocID(s string, docs []Document) (string, bool) {
	for i := range docs {
		if docs[i].ID == s {
			return s, true
		}
	}
	return "", false
}

func appendUnique(ids []string, id string) []string {
	for _, x := range ids {
		if x == id {
			return ids
		}
	}
	return append(ids, id)
}
