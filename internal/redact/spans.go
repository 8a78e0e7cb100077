package redact

import (
	"slices"
	"strings"
)

// Card and IBAN numbers are found in two steps. The regular expression takes a whole run of
// digit groups (cards) or the IBAN with everything alphanumeric after it; a replace function
// then finds the valid numbers inside. Checking the match as a whole let a CVV after a card
// number ("4111 1111 1111 1111 123") or a currency code after an IBAN ("DE89 3704 0044 0532
// 0130 00 EUR") fail the checksum, and the number went out whole, or in part through the
// phone detector.

const (
	cardMarker = "[REDACTED:" + Card + "]"
	ibanMarker = "[REDACTED:" + IBAN + "]"
)

// isCardSep reports a separator between the digit groups of a card number.
func isCardSep(c byte) bool { return c == ' ' || c == '-' }

// groupBounds returns the byte offsets at which the groups of m start and end; groups are
// separated by one byte for which sep is true.
func groupBounds(m string, sep func(byte) bool) (starts, ends []int) {
	starts = append(starts, 0)
	for i := 0; i < len(m); i++ {
		if sep(m[i]) {
			ends = append(ends, i)
			starts = append(starts, i+1)
		}
	}
	return starts, append(ends, len(m))
}

// replaceCards redacts, from left to right, the longest run of whole digit groups that is a
// Luhn-valid card number of 13 to 19 digits. A last group of 3 or 4 digits right after a card
// number (its CVV) is redacted with it. Then any other valid run that those leave partly
// uncovered is redacted together with the one it overlaps: one run of digits in ten passes the
// Luhn check by chance, so groups written before a card number ("00002 4111 1111 1111 1111")
// can make a run that takes the card's first groups, and its last ones must not go out.
func replaceCards(m string) (string, int) {
	starts, ends := groupBounds(m, isCardSep)
	// longest[a] is the last group of the longest valid run starting at group a, or -1; both
	// passes below read it.
	longest := make([]int, len(starts))
	for a := range starts {
		end, digits := -1, 0
		for k := a; k < len(ends); k++ {
			digits += ends[k] - starts[k]
			if digits > 19 {
				break
			}
			if digits >= 13 && luhn(m[starts[a]:ends[k]]) {
				end = k
			}
		}
		longest[a] = end
	}
	type run struct{ first, last int } // groups
	var runs []run
	for a := 0; a < len(starts); a++ {
		end := longest[a]
		if end < 0 {
			continue
		}
		if last := len(ends) - 1; end+1 == last && (ends[last]-starts[last] == 3 || ends[last]-starts[last] == 4) {
			end = last
		}
		runs = append(runs, run{a, end})
		a = end
	}
	if len(runs) == 0 {
		return m, 0
	}
	for a, end := range longest {
		if end < 0 {
			continue
		}
		// Merge [a, end] with the runs it overlaps, unless they redact all of it already.
		merged, covered := run{a, end}, 0
		kept := runs[:0:0]
		for _, r := range runs {
			if r.last < a || end < r.first {
				kept = append(kept, r)
				continue
			}
			covered += min(end, r.last) - max(a, r.first) + 1
			merged = run{min(merged.first, r.first), max(merged.last, r.last)}
		}
		if covered == end-a+1 {
			continue // redacted already
		}
		runs = append(kept, merged)
		slices.SortFunc(runs, func(x, y run) int { return x.first - y.first })
	}
	var b strings.Builder
	copied := 0
	for _, r := range runs {
		b.WriteString(m[copied:starts[r.first]])
		b.WriteString(cardMarker)
		copied = ends[r.last]
	}
	b.WriteString(m[copied:])
	return b.String(), len(runs)
}

// replaceIBANs redacts the IBAN at the start of m: exactly as many characters as its
// country's IBANs have (ISO 13616 registry) or, for a country not in the table, the longest
// run of whole space-separated groups that passes the mod-97 check. What follows is searched
// again, for a second IBAN.
func replaceIBANs(m string) (string, int) {
	end := -1
	if want, ok := ibanLength[m[:2]]; ok {
		n := 0
		for j := 0; j < len(m) && end < 0; j++ {
			if m[j] != ' ' {
				if n++; n == want && ibanValid(m[:j+1]) {
					end = j + 1
				}
			}
		}
	} else {
		_, ends := groupBounds(m, func(c byte) bool { return c == ' ' })
		for k := len(ends) - 1; k >= 0 && end < 0; k-- {
			if ibanValid(m[:ends[k]]) {
				end = ends[k]
			}
		}
	}
	if end < 0 {
		return m, 0
	}
	rest, n := m[end:], 1
	if ibanRe.MatchString(rest) {
		var k int
		rest = ibanRe.ReplaceAllStringFunc(rest, func(s string) string {
			out, c := replaceIBANs(s)
			k += c
			return out
		})
		n += k
	}
	return ibanMarker + rest, n
}

// ibanLength is the IBAN length per country code, from the SWIFT IBAN registry.
var ibanLength = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
	"BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
	"DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
	"GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
	"IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
	"LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
	"PL": 28, "PS": 29, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31, "SD": 18,
	"SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
	"TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}
