package record

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/text"
)

// The reference: parseCitations as it was before its allocation-free rewrite. The rewrite must
// give the same citations for every answer. Both split sentences with internal/text, whose
// rules its own tests pin; the reference checks the marker and claim handling.

func ParseCitationsRef(answer string, docs []Document) []Citation {
	if strings.IndexByte(answer, '[') < 0 {
		return nil
	}
	var out []Citation
	for _, sentence := range text.Sentences(answer) {
		var ids []string
		var claim strings.Builder
		rest := sentence
		for {
			open := strings.IndexByte(rest, '[')
			if open < 0 {
				claim.WriteString(rest)
				break
			}
			end := strings.IndexByte(rest[open:], ']')
			if end < 0 {
				claim.WriteString(rest)
				break
			}
			inner := rest[open+1 : open+end]
			resolved := resolveMarkerRef(inner, docs)
			if resolved == nil {
				claim.WriteString(rest[:open+end+1])
			} else {
				claim.WriteString(rest[:open])
				for _, id := range resolved {
					ids = appendUniqueRef(ids, id)
				}
			}
			rest = rest[open+end+1:]
		}
		if len(ids) == 0 {
			continue
		}
		text := strings.Join(strings.Fields(claim.String()), " ")
		text = strings.TrimSpace(punctuationSpaceRef.Replace(text))
		out = append(out, Citation{Text: text, DocumentIDs: ids})
	}
	return out
}

// punctuationSpaceRef closes the gap a removed marker leaves before punctuation ("days [1]." →
// "days.").
var punctuationSpaceRef = strings.NewReplacer(" .", ".", " !", "!", " ?", "?", " ,", ",", " ;", ";", " :", ":")

// resolveMarkerRef returns the document ids a marker's inner text cites, or nil when it is not a
// citation marker.
func resolveMarkerRef(inner string, docs []Document) []string {
	inner = strings.TrimSpace(inner)
	if inner == "" || len(inner) > 256 {
		return nil
	}
	parts := strings.Split(inner, ",")
	var ids []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil
		}
		if id, ok := matchDocIDRef(p, docs); ok {
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

func matchDocIDRef(s string, docs []Document) (string, bool) {
	for i := range docs {
		if docs[i].ID == s {
			return s, true
		}
	}
	return "", false
}

func appendUniqueRef(ids []string, id string) []string {
	for _, x := range ids {
		if x == id {
			return ids
		}
	}
	return append(ids, id)
}

func checkSameCitations(t *testing.T, answer string, docs []Document) {
	t.Helper()
	got, want := citationsOf(answer, docs), ParseCitationsRef(answer, docs)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseCitations(%q)\n got %#v\nwant %#v", answer, got, want)
	}
}

func TestParseCitationsMatchesReference(t *testing.T) {
	docs := []Document{{ID: "d1"}, {ID: "d2"}, {ID: "faq-7"}, {ID: "1"}}
	pieces := []string{"Refunds", " take", " 5", " days", " [1]", "[2, 3]", "[faq-7,2]", "[ 4 ]", "[9]", "[sic]", "[,]", "[1,,2]",
		".", "!", "?", ",", ";", ":", " .", " ,", "\n", "\t", "  ", " e.g.", " Dr.", " DR.", " İ.e.", " 3.5", " é", "\u00a0", "\u0085", "[", "]",
		" fig.", " Approx.", " verylongword.", " x"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(14) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		checkSameCitations(t, b.String(), docs)
	}
	checkSameCitations(t, strings.Repeat("long claim ", 40)+"[1]. "+strings.Repeat("x", 300)+" [2]", docs)
}

func FuzzParseCitationsMatchesReference(f *testing.F) {
	f.Add("Refunds take 5 days [1]. See [faq-7, 2]! e.g. [3].")
	f.Add("[[[1]]] [,] [1,,2] .[1]")
	f.Add("Caf\u00e9 [1] \u00a0 ; [2]")
	docs := []Document{{ID: "d1"}, {ID: "d2"}, {ID: "faq-7"}}
	f.Fuzz(func(t *testing.T, answer string) { checkSameCitations(t, answer, docs) })
}
