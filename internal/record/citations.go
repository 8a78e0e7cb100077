package record

import (
	"slices"
	"strconv"
	"strings"

	"github.com/ragwatch/ragwatch/internal/text"
)

// parseCitations extracts citations from an answer that did not carry them explicitly
// (Record.Normalize). A marker is a bracketed list: `[1]`, `[2,3]` or `[2, 3]` are 1-based
// positions in docs; `[doc-id]` is a document id. Each sentence (as internal/text splits them)
// holding markers gives one citation: the sentence without its markers as the claim, and the
// cited document ids in order of first mention. Markers that resolve to no document are
// ignored, so `[sic]` or a number past the list cite nothing. Without claims, the citations
// hold their document ids only (Text ""), as an elided record's do: only their count is read.
func parseCitations(answer string, docs []Document, claims bool) []Citation {
	markers := strings.Count(answer, "[")
	if markers == 0 {
		return nil
	}
	// A record's citations share one string for their claims and one array for their ids, and
	// the list holds at most one citation per marker: three allocations for up to 16 citations
	// whose ASCII claims fit in 1 KB (the stack buffers), a few more beyond.
	var (
		out     []Citation
		ids     []string // every citation's ids, one after the other
		buf     [1024]byte
		texts   = buf[:0] // every claim, one after the other
		ends    [16]int   // where each claim ends in texts
		claimAt = ends[:0]
	)
	var sentences [16]string
	var claimBuf [256]byte
	for _, sentence := range text.AppendSentences(sentences[:0], answer) {
		if strings.IndexByte(sentence, '[') < 0 {
			continue // no marker: no citation
		}
		first := len(ids)
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
					if !slices.Contains(ids[first:], id) {
						if ids == nil {
							ids = make([]string, 0, 2*markers)
						}
						ids = append(ids, id)
					}
				}
			}
			rest = rest[open+end+1:]
		}
		if len(ids) == first {
			continue
		}
		if out == nil {
			out = make([]Citation, 0, markers)
		}
		if claims {
			texts = appendClaim(texts, claim)
			claimAt = append(claimAt, len(texts))
		}
		out = append(out, Citation{DocumentIDs: ids[first:len(ids):len(ids)]})
	}
	if !claims {
		return out
	}
	all, from := string(texts), 0
	for i := range out {
		out[i].Text = all[from:claimAt[i]]
		from = claimAt[i]
	}
	return out
}

// appendClaim appends strings.TrimSpace(punctuationSpace.Replace(strings.Join(strings.Fields(claim),
// " "))) to dst, in one pass for ASCII text: white space runs become one space, none at the
// ends, and none before punctuation.
func appendClaim(dst, claim []byte) []byte {
	for _, c := range claim {
		if c >= 0x80 {
			text := strings.Join(strings.Fields(string(claim)), " ")
			return append(dst, strings.TrimSpace(punctuationSpace.Replace(text))...)
		}
	}
	start := len(dst)
	space := false
	for _, c := range claim {
		switch c {
		case ' ', '\t', '\n', '\v', '\f', '\r':
			space = len(dst) > start
			continue
		case '.', '!', '?', ',', ';', ':':
			space = false // the gap a removed marker leaves ("days [1]." → "days.")
		}
		if space {
			dst = append(dst, ' ')
			space = false
		}
		dst = append(dst, c)
	}
	return dst
}

// punctuationSpace closes the gap a removed marker leaves before punctuation ("days [1]." →
// "days."); appendClaim's path for non-ASCII text.
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
