package text

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSentences(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"empty", "", nil},
		{"white space only", " \n\t \n", nil},
		{"three stops", "It opens at nine. Is it free? Yes!", []string{"It opens at nine.", "Is it free?", "Yes!"}},
		{"no final stop", "It opens at nine. Parking is free", []string{"It opens at nine.", "Parking is free"}},
		{"e.g. and i.e. never end a sentence", "Some fruit, e.g. apples, keep. Some, i.e. The Few, stay.",
			[]string{"Some fruit, e.g. apples, keep.", "Some, i.e. The Few, stay."}},
		{"U.S. before a lower-case word", "He moved to the U.S. in 2001. He stayed.", []string{"He moved to the U.S. in 2001.", "He stayed."}},
		{"U.S. before a sentence opener", "He moved to the U.S. The rest followed.", []string{"He moved to the U.S.", "The rest followed."}},
		{"U.S. with a possessive", "He praised the U.S.'s economy. It grew.", []string{"He praised the U.S.'s economy.", "It grew."}},
		{"U.S. at the end", "He moved to the U.S.", []string{"He moved to the U.S."}},
		{"decimals and versions", "It costs 3.5 dollars. Version 1.2.3 is out.", []string{"It costs 3.5 dollars.", "Version 1.2.3 is out."}},
		{"a number ends a sentence", "Sales reached 3.5. Prices fell.", []string{"Sales reached 3.5.", "Prices fell."}},
		{"domain names", "See example.com for details. Then call.", []string{"See example.com for details.", "Then call."}},
		{"titles and initials", "Dr. Smith met J. K. Rowling at St. Paul's. Mr. Jones left.",
			[]string{"Dr. Smith met J. K. Rowling at St. Paul's.", "Mr. Jones left."}},
		{"title in capitals", "DR. Smith came. FIG. 3 shows it.", []string{"DR. Smith came.", "FIG. 3 shows it."}},
		{"No. before a number, no at the end", "No. 5 won, see fig. 3 and approx. five more. The answer is no. It closed.",
			[]string{"No. 5 won, see fig. 3 and approx. five more.", "The answer is no.", "It closed."}},
		{"Wikipedia markers glued to the stop", "It was acquired by Illumination.[6 ] It was directed by Coffin.",
			[]string{"It was acquired by Illumination.[6 ]", "It was directed by Coffin."}},
		{"ambiguous abbreviation before an opener", "It came from Acme Inc. The firm grew.", []string{"It came from Acme Inc.", "The firm grew."}},
		{"ambiguous abbreviation before a name", "It came from Acme Inc. Paris office.", []string{"It came from Acme Inc. Paris office."}},
		{"month abbreviation", "Prices rose in Jan. and fell later.", []string{"Prices rose in Jan. and fell later."}},
		{"citation markers before the stop", "Refunds take 5 days [1]. Both agree [2, 3]! See [doc2].",
			[]string{"Refunds take 5 days [1].", "Both agree [2, 3]!", "See [doc2]."}},
		{"citation markers after the stop", "It rises. [1] Then it falls. [doc2][3] Done.",
			[]string{"It rises. [1]", "Then it falls. [doc2][3]", "Done."}},
		{"marker glued to the stop", "It rises.[1] Then it falls.", []string{"It rises.[1]", "Then it falls."}},
		{"bracketed prose after the stop is the next sentence", "It rises. [Later it fell.] Done.",
			[]string{"It rises.", "[Later it fell.]", "Done."}},
		{"a decimal in brackets", "A ratio [1.5] here. Next.", []string{"A ratio [1.5] here.", "Next."}},
		{"newlines always end a sentence", "Line one [1]\nLine two [2]\r\n\nLine three", []string{"Line one [1]", "Line two [2]", "Line three"}},
		{"list items", "Steps:\n- Lower costs\n* Faster delivery\n• Better support\n1. Open the box\n2) Plug it in\na) Wait. Then go.",
			[]string{"Steps:", "Lower costs", "Faster delivery", "Better support", "Open the box", "Plug it in", "Wait.", "Then go."}},
		{"a year on its own line is not a list item", "2009.\n12.5 percent.", []string{"2009.", "12.5 percent."}},
		{"quotes close the sentence", `He said "it is done." Then he left. 'Yes.' She agreed.`,
			[]string{`He said "it is done."`, "Then he left.", "'Yes.'", "She agreed."}},
		{"curly quotes and parentheses", "He said “done.” It ended (see above.) Next one.",
			[]string{"He said “done.”", "It ended (see above.)", "Next one."}},
		{"repeated stops", "Really?! Yes!!! Fine.", []string{"Really?!", "Yes!!!", "Fine."}},
		{"ellipsis before a capital", "Wait... What happened? Well… Nothing.", []string{"Wait...", "What happened?", "Well…", "Nothing."}},
		{"ellipsis before a lower-case word", "It went on... and on… and stopped.", []string{"It went on... and on… and stopped."}},
		{"four dots are one stop", "So on.... Next.", []string{"So on....", "Next."}},
		{"tab and no-break space after a stop", "One.\tTwo.\u00a0Three.", []string{"One.", "Two.", "Three."}},
		{"non-ASCII text", "Le café ouvre à 9 h. Ça coûte 3,5 €. İ.e. nothing.", []string{"Le café ouvre à 9 h.", "Ça coûte 3,5 €.", "İ.e.", "nothing."}},
		{"lower-case dialogue", "i love that movie. it was great", []string{"i love that movie.", "it was great"}},
		{"stop alone", ". . !", []string{".", ".", "!"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sentences(tt.text); !slices.Equal(got, tt.want) {
				t.Errorf("Sentences(%q)\n got %q\nwant %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestClaims(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"semicolons and clause joints with three words on each side",
			"Prices rose across the whole region; rents fell sharply in the city center, and wages stayed flat; so did rates; all fell.",
			[]string{"Prices rose across the whole region", "rents fell sharply in the city center", "and wages stayed flat", "so did rates; all fell."}},
		{"short sides stay whole", "Rents fell, and wages too.", []string{"Rents fell, and wages too."}},
		{"dashes and which", "The bridge opened in 1937 – it was the longest then. The firm grew fast, which surprised its founders.",
			[]string{"The bridge opened in 1937", "it was the longest then.", "The firm grew fast", "which surprised its founders."}},
		{"sentences first", "Dr. Smith moved to the U.S. in 2001. He paid $3.5 million for a house.",
			[]string{"Dr. Smith moved to the U.S. in 2001.", "He paid $3.5 million for a house."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Claims(tt.text, nil); !slices.Equal(got, tt.want) {
				t.Errorf("Claims(%q)\n got %q\nwant %q", tt.text, got, tt.want)
			}
		})
	}
	// The caller's word count decides: counting only long words keeps the sentence whole.
	long := func(s string) int {
		n := 0
		for _, w := range strings.Fields(s) {
			if len(w) > 6 {
				n++
			}
		}
		return n
	}
	s := "Prices rose across the whole region; rents fell sharply in the city center."
	if got := Claims(s, long); !slices.Equal(got, []string{s}) {
		t.Errorf("Claims with a custom count: %q", got)
	}
}

func TestAppendSentencesDoesNotAllocate(t *testing.T) {
	s := "Dr. Smith paid $3.50, e.g. for tea [1]. It rose 2.5% [doc2]. Why?\n- New line… Then Acme Inc. The end."
	buf := make([]string, 0, 16)
	if n := testing.AllocsPerRun(100, func() { buf = AppendSentences(buf[:0], s) }); n != 0 {
		t.Errorf("AppendSentences allocates %v times", n)
	}
	if len(buf) != 6 {
		t.Errorf("%d sentences: %q", len(buf), buf)
	}
}

// FuzzSentences checks what every consumer relies on: sentences are non-empty, trimmed,
// non-overlapping substrings of the text in order, and they hold all of its non-space text
// except list markers.
func FuzzSentences(f *testing.F) {
	f.Add("Dr. Smith paid $3.50, e.g. for tea [1]. It rose 2.5% [doc2]. Why?\n- New line")
	f.Add("Wait... what?! “Done.” (see above.) [1] [sic] U.S. The end…")
	f.Add("1. a\n2) b\n\u00a0.\u0085 İ.e. x")
	f.Fuzz(func(t *testing.T, s string) {
		rest := s
		for _, sent := range Sentences(s) {
			if sent == "" || sent != strings.TrimSpace(sent) {
				t.Fatalf("sentence %q of %q is empty or untrimmed", sent, s)
			}
			k := strings.Index(rest, sent)
			if k < 0 {
				t.Fatalf("sentence %q is not in order in %q", sent, s)
			}
			rest = rest[k+len(sent):]
		}
		if utf8.ValidString(s) && !strings.ContainsAny(s, "-*•–—+)") {
			var joined, all strings.Builder
			for _, sent := range Sentences(s) {
				joined.WriteString(sent + " ")
			}
			for _, w := range strings.Fields(s) {
				all.WriteString(w)
			}
			if strings.Join(strings.Fields(joined.String()), "") != all.String() && !strings.ContainsAny(s, "0123456789") {
				t.Fatalf("sentences of %q lose text: %q", s, Sentences(s))
			}
		}
	})
}

func BenchmarkAppendSentences(b *testing.B) {
	for _, answer := range []string{
		"Objects can be restored for 30 days after deletion [2].",
		"The Enterprise plan costs $50 per month and includes SSO, audit logs and priority support [ent]. Annual billing takes 10% off. Contact sales for more than 500 seats.",
	} {
		b.Run(answer[:12], func(b *testing.B) {
			var buf [16]string
			b.ReportAllocs()
			for b.Loop() {
				AppendSentences(buf[:0], answer)
			}
		})
	}
}
