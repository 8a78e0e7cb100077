package text

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/truncate"
)

func TestIsRefusal(t *testing.T) {
	cases := []struct {
		answer string
		want   bool
	}{
		// Refusals.
		{"I don't know.", true},
		{"I do not know the answer to that.", true},
		{"I’m not sure — the documents do not say.", true},
		{"The documents do not say when the store opens.", true},
		{"The provided context doesn't mention a refund window.", true},
		{"I couldn't find anything about SSO in the knowledge base.", true},
		{"I could not find information on that topic.", true},
		{"There is no information about the 2027 pricing.", true},
		{"There's no mention of Enterprise discounts in the documents.", true},
		{"I'm sorry, but I don't have the answer to your question.", true},
		{"I do not have specific information about the current schedule of the Arizona Cardinals. However, I can suggest checking the official NFL website.", true},
		{"Sorry, I was unable to find that in our help center.", true},
		{"I cannot answer that based on the provided documents.", true},
		{"Unfortunately the context does not contain information about shipping to Canada.", true},
		{"The passages don't specify the warranty length.", true},
		{"That detail is not mentioned in the documents.", true},
		{"Based on the sources, the launch date is not provided in the text.", true},
		{"Hello! The information provided does not cover this plan. Please contact sales.", true},
		{"I DON'T KNOW", true},
		{"I do not\tknow", true},
		{"Good question. I dont know, sorry.", true},
		{"No relevant information was found for your query.", true},
		{"The knowledge base does not say which regions are supported.", true},
		// Not refusals.
		{"I don't know why you'd wait — refunds take 5 days.", false},
		{"Refunds take 5 days.", false},
		{"If you don't know your password, reset it from the login page.", false},
		{"There is no information loss when you export to PNG.", false},
		{"The documents say refunds take 5 days.", false},
		{"You can't find the button? It's in the top right corner.", false},
		{"No, the Pro plan does not include SSO.", false},
		{"The router does not say hello; it blinks green when ready.", false},
		{"I don't know of a faster way than the bulk import, which takes 5 minutes.", false},
		{"I couldn't find the exact date, but the launch was in March 2024.", false},
		{"Not sure which plan? Pro costs $20 and Enterprise costs $50.", false},
		{"The Enterprise plan includes SSO. The Pro plan does not provide it.", false},
		{"Enterprise costs $50. It includes SSO, audit logs and priority support. Prices are monthly. I don't know of any discounts.", false},
		{"", false},
		{"Pay within 30 days. If the invoice does not say a due date, the default is 30 days.", false},
	}
	pos, neg := 0, 0
	for _, tc := range cases {
		if got := IsRefusal(tc.answer); got != tc.want {
			t.Errorf("IsRefusal(%q) = %v, want %v", tc.answer, got, tc.want)
		}
		if tc.want {
			pos++
		} else {
			neg++
		}
	}
	if pos+neg < 30 || pos < 10 || neg < 10 {
		t.Fatalf("table has %d refusals and %d non-refusals; want at least 30 in all, 10 of each", pos, neg)
	}
}

// FuzzIsRefusal checks that the negation anchor never hides a refusal: IsRefusal says what
// the whole match says on every input.
func FuzzIsRefusal(f *testing.F) {
	f.Add("I don't know why you'd wait.")
	f.Add("The documents do not say.")
	f.Add("I don`t know.")
	f.Add("There is no\tinformation about it.")
	f.Add("Notifications are not covered in the manual.")
	f.Add("I CANNOT find it.")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := IsRefusal(s), refusalIn(truncate.String(s, refusalScan)); got != want {
			t.Fatalf("IsRefusal(%q) = %v, the whole match says %v", s, got, want)
		}
	})
}

// TestNegationAnchorHoldsEveryPhrase checks, for every refusal phrase in every spelling
// normalizeRefusal reads as the same (case, apostrophes, white space) and in a sentence, that
// IsRefusal finds what the whole match finds; and that words holding "not" or "no" are not
// anchors.
func TestNegationAnchorHoldsEveryPhrase(t *testing.T) {
	spellings := func(p string) []string {
		out := []string{p, strings.ToUpper(p), strings.ToUpper(p[:1]) + p[1:]}
		for _, apo := range []string{"\u2019", "\u2018", "`"} {
			out = append(out, strings.ReplaceAll(p, "'", apo))
		}
		for _, sp := range []string{"\t", "  ", "\u00a0", "\u2009", " \r "} {
			out = append(out, strings.ReplaceAll(p, " ", sp))
		}
		return out
	}
	checked, refusals := 0, 0
	for _, p := range refusalPhrases {
		for _, sp := range spellings(p) {
			for _, answer := range []string{sp + ".", "Sorry, " + sp + " about refunds.", "Thanks. " + sp + " the refund date!", "(" + sp + ")"} {
				want := refusalIn(truncate.String(answer, refusalScan))
				if got := IsRefusal(answer); got != want {
					t.Errorf("IsRefusal(%q) = %v, the whole match says %v", answer, got, want)
				}
				checked++
				if want {
					refusals++
				}
			}
		}
	}
	if refusals < checked/3 {
		t.Errorf("%d of %d spellings are refusals: the spellings do not exercise the phrases", refusals, checked)
	}
	for _, s := range []string{"Notifications fire on object creation.", "Buckets can move to another region.",
		"Nothing else changes.", "A note on billing.", "The casino opens at noon.", "Knots and nodes.", "Cannoted."} {
		if hasNegationAnchor(s) {
			t.Errorf("%q holds a negation anchor", s)
		}
	}
	for _, s := range []string{"It is not.", "NOT", "It cannot move.", "(not)", "no way", "No\u00a0way", "don't", "don\u2019t",
		"don`t", "dont", "Unable to", "é not", "2not"} {
		if !hasNegationAnchor(s) {
			t.Errorf("%q holds no negation anchor", s)
		}
	}
}

func BenchmarkIsRefusal(b *testing.B) {
	for _, answer := range []string{
		"The Enterprise plan costs $50 per month and includes SSO, audit logs and priority support [ent]. Annual billing takes 10% off. Contact sales for more than 500 seats.",
		"No, the Pro plan does not include SSO: it is only in the Enterprise plan, which costs $50 per month.",
		"I'm sorry, but I couldn't find anything about SSO in the documents.",
	} {
		b.Run(answer[:12], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				IsRefusal(answer)
			}
		})
	}
}

// The ASCII pass of normalizeRefusal gives what the general one does.
func TestNormalizeRefusalASCIIMatchesGeneral(t *testing.T) {
	cases := []string{"", " ", "  I Don`t  KNOW\t", "\n\v\f\rThe Documents do NOT say.\r\n", "a  b   c", "x\x00y", "`quoted`", "ALL CAPS ' AND ` TICKS"}
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "aZ `'\t\n\v\f\r.,!?09Iid\x00\x1f\x7f"
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := normalizeRefusal(s), normalizeRefusalSlow(s); got != want {
			t.Fatalf("normalizeRefusal(%q) = %q, want %q", s, got, want)
		}
	}
	// Beyond ASCII the general path runs: curly apostrophes, non-ASCII spaces and letters.
	for s, want := range map[string]string{"I don\u2019t know": "i don't know", "A\u00a0B\u0085C": "a b c", "\u0130STANBUL": "istanbul"} {
		if got := normalizeRefusal(s); got != want {
			t.Errorf("normalizeRefusal(%q) = %q, want %q", s, got, want)
		}
	}
}
