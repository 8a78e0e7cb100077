package record

import (
	"reflect"
	"testing"
	"time"
)

// citationsOf is the citations Record.Normalize parses from an answer, with their claims.
func citationsOf(answer string, docs []Document) []Citation {
	return parseCitations(answer, docs, true)
}

func TestParseCitations(t *testing.T) {
	docs := []Document{{ID: "d1"}, {ID: "d2"}, {ID: "faq-7"}}
	cases := []struct {
		name   string
		answer string
		want   []Citation
	}{
		{"no markers", "Refunds take five days.", nil},
		{"empty", "", nil},
		{"one position", "Refunds take 5 days [1].", []Citation{{"Refunds take 5 days.", []string{"d1"}}}},
		{"list of positions", "Both agree [2,3].", []Citation{{"Both agree.", []string{"d2", "faq-7"}}}},
		{"list with spaces", "Both agree [2, 3]!", []Citation{{"Both agree!", []string{"d2", "faq-7"}}}},
		{"document id", "See the FAQ [faq-7]?", []Citation{{"See the FAQ?", []string{"faq-7"}}}},
		{"id and position mixed, deduplicated in order", "Mixed [1, faq-7] and again [1][d1].",
			[]Citation{{"Mixed and again.", []string{"d1", "faq-7"}}}},
		{"one citation per sentence", "Refunds take 5 days [1]. Support answers in a day [2]. No source here.",
			[]Citation{{"Refunds take 5 days.", []string{"d1"}}, {"Support answers in a day.", []string{"d2"}}}},
		{"marker after the full stop", "It rises. [1] Then it falls. [2]",
			[]Citation{{"It rises.", []string{"d1"}}, {"Then it falls.", []string{"d2"}}}},
		{"decimals do not end a sentence", "It costs 3.5 dollars [1]. Version 1.2 is out [2].",
			[]Citation{{"It costs 3.5 dollars.", []string{"d1"}}, {"Version 1.2 is out.", []string{"d2"}}}},
		{"decimal marker is not a citation", "A ratio [1.5] here.", nil},
		{"unknown marker stays in the claim", "Unknown [sic] marker [1].", []Citation{{"Unknown [sic] marker.", []string{"d1"}}}},
		{"positions past the list cite nothing", "Past the end [7]. Zero [0]. Negative [-1].", nil},
		{"a list with a non-marker part is text", "Half [1, foo] bad.", nil},
		{"a list with one position in range", "Partly [1, 9].", []Citation{{"Partly.", []string{"d1"}}}},
		{"unclosed bracket", "Unclosed [1 bracket.", nil},
		{"empty brackets", "Nothing [] here [ ].", nil},
		{"newlines end sentences", "Line one [1]\nLine two [2]",
			[]Citation{{"Line one", []string{"d1"}}, {"Line two", []string{"d2"}}}},
		{"abbreviation does not end a sentence", "Some, e.g. refunds, take days [2].",
			[]Citation{{"Some, e.g. refunds, take days.", []string{"d2"}}}},
		{"titles, initials and U.S. do not end a sentence", "Dr. Smith met J. K. Rowling in the U.S. in 2001 [1].",
			[]Citation{{"Dr. Smith met J. K. Rowling in the U.S. in 2001.", []string{"d1"}}}},
		{"list items lose their bullet", "Steps:\n- Refunds take 5 days [1]\n2. Support answers [doc2][2]",
			[]Citation{{"Refunds take 5 days", []string{"d1"}}, {"Support answers [doc2]", []string{"d2"}}}},
		{"a closing quote stays with its sentence", `He said "it is done." [1] Then he left [2].`,
			[]Citation{{`He said "it is done."`, []string{"d1"}}, {"Then he left.", []string{"d2"}}}},
		{"only a marker", "[1]", []Citation{{"", []string{"d1"}}}},
		{"the example of docs/record.md", "Refunds take 5 days [1]. Both agree [2, 3]! Unknown [sic] marker [faq-7].",
			[]Citation{{"Refunds take 5 days.", []string{"d1"}}, {"Both agree!", []string{"d2", "faq-7"}}, {"Unknown [sic] marker.", []string{"faq-7"}}}},
		{"comma after marker", "First [1], then second [2].", []Citation{{"First, then second.", []string{"d1", "d2"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := citationsOf(c.answer, docs)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("parseCitations(%q)\n got %#v\nwant %#v", c.answer, got, c.want)
			}
			// An elided record's: the same citations and ids, without their claims.
			var idsOnly []Citation
			for _, ct := range c.want {
				idsOnly = append(idsOnly, Citation{DocumentIDs: ct.DocumentIDs})
			}
			elided := Record{Answer: c.answer, Documents: docs, Elided: true}
			elided.Normalize(time.Unix(1, 0))
			if !reflect.DeepEqual(elided.Citations, idsOnly) {
				t.Errorf("elided Normalize(%q)\n got %#v\nwant %#v", c.answer, elided.Citations, idsOnly)
			}
		})
	}
}

func TestParseCitationsIDBeforePosition(t *testing.T) {
	// A document whose id is a number is matched by id first: "[2]" is the document "2",
	// not the second document.
	docs := []Document{{ID: "2"}, {ID: "x"}}
	got := citationsOf("Numbered ids [2].", docs)
	want := []Citation{{"Numbered ids.", []string{"2"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v", got)
	}
	if got := citationsOf("No documents [1].", nil); got != nil {
		t.Errorf("no documents: %#v", got)
	}
}

func FuzzParseCitations(f *testing.F) {
	f.Add("Refunds take 5 days [1]. See [faq-7, 2]! e.g. [3].")
	f.Add("[[[1]]] [,] [1,,2] .[1]")
	docs := []Document{{ID: "d1"}, {ID: "d2"}, {ID: "faq-7"}}
	f.Fuzz(func(t *testing.T, answer string) {
		for _, c := range citationsOf(answer, docs) {
			if len(c.DocumentIDs) == 0 {
				t.Fatalf("citation without documents: %#v", c)
			}
			for _, id := range c.DocumentIDs {
				if id != "d1" && id != "d2" && id != "faq-7" {
					t.Fatalf("cites unknown id %q", id)
				}
			}
		}
	})
}
