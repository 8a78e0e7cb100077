package record

import (
	"strconv"
	"strings"
)

// ParseCitations extracts citations from an answer that did not carry them explicitly. A marker
// is a bracketed list: `[1]`, `[2,3]` or `[2, 3]` are 1-based positions in docs; `[doc-id]` is
// a document id. Each sentence holding markers gives one citation: the sentence without its
// markers as the claim, and the cited document ids in order of first mention. Markers that
// resolve to no document are ignored, so `[sic]` or a number past the list cite nothing.
func ParseCitations(answer string, docs []Document) []Citation {
	if strings.IndexByte(answer, '[') < 0 {
		return nil
	}
	var out []Citation
	var sentences [16]string
	var claimBuf [256]byte
	for _, sentence := range splitSentences(sentences[:0], answer) {
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

// abbreviations end with a full stop that does not end a sentence.
var abbreviations = map[string]bool{"e.g": true, "i.e": true, "vs": true, "cf": true, "dr": true, "mr": true, "mrs": true, "ms": true, "fig": true, "approx": true}

// isAbbreviation reports whether the word ending at text[:dot] is a known abbreviation.
func isAbbreviation(text string, dot int) bool {
	start := strings.LastIndexAny(text[:dot], " \n([") + 1
	word := text[start:dot]
	var lower [8]byte
	if len(word) > len(lower) {
		for i := 0; i < len(word); i++ {
			if word[i] >= 0x80 {
				return abbreviations[strings.ToLower(word)] // non-ASCII may lower to fewer bytes
			}
		}
		return false // longer than every abbreviation
	}
	for i := 0; i < len(word); i++ {
		c := word[i]
		if c >= 0x80 {
			return abbreviations[strings.ToLower(word)]
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return abbreviations[string(lower[:len(word)])]
}

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

// splitSentences appends to out the sentences of text: it cuts after '.', '!', '?' or a newline
// when followed by white space or the end, keeping a marker that trails the full stop
// ("... rises. [1]") with its sentence.
func splitSentences(out []string, text string) []string {
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '\n' {
			if s := strings.TrimSpace(text[start:i]); s != "" {
				out = append(out, s)
			}
			start = i + 1
			continue
		}
		if c != '.' && c != '!' && c != '?' {
			continue
		}
		if c == '.' && isAbbreviation(text, i) {
			continue
		}
		j := i + 1
		// A marker right after the stop belongs to this sentence.
		for j < len(text) {
			k := j
			for k < len(text) && text[k] == ' ' {
				k++
			}
			if k < len(text) && text[k] == '[' {
				if e := strings.IndexByte(text[k:], ']'); e > 0 {
					j = k + e + 1
					continue
				}
			}
			break
		}
		if j < len(text) && text[j] != ' ' && text[j] != '\n' {
			continue // "3.5", "e.g.x": not a sentence end
		}
		if s := strings.TrimSpace(text[start:j]); s != "" {
			out = append(out, s)
		}
		start = j
		i = j - 1
	}
	if s := strings.TrimSpace(text[start:]); s != "" {
		out = append(out, s)
	}
	return out
}
