package redact

import (
	"regexp"
	"slices"
)

// Card and IBAN numbers are found in two steps. The regular expression takes a whole run of
// digit groups (cards) or the IBAN with everything alphanumeric after it; a second step then
// finds the valid numbers inside. Checking the match as a whole let a CVV after a card number
// ("4111 1111 1111 1111 123") or a currency code after an IBAN ("DE89 3704 0044 0532 0130 00
// EUR") fail the checksum, and the number went out whole, or in part through the phone
// detector.

var (
	// A CVV phrase: the code after "cvv", "CVC:", "security code", … is redacted.
	cvvRe = regexp.MustCompile(`(?i)\b(?:cvv2?|cvc2?|cvn|csc|cid code|card (?:security|verification) (?:code|value|number)|security code)(?: ?(?:code|number|no\.?|#))? ?(?:[:=#-]|is)? ?(\d{3,4})\b`)
)

// digitRun returns the run of digit groups starting at b[a] (a digit): groups separated by
// one space or by one of . - / with a space on either side or not, the whole run, so that
// cardSpans sees a card number with whatever is written next to it. White space of every
// kind is one space in the normal form. A hand-written scan: the regular expression for it
// was tried at every digit and cost a third of the time on text full of numbers.
func digitRun(b []byte, a int) (start, end, digits int) {
	i := a
	for {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			digits++
		}
		// A separator: " ", "." "-" "/", or one of those with a space before and/or after.
		j := i
		if j < len(b) && b[j] == ' ' {
			j++
		}
		if j < len(b) && (b[j] == '.' || b[j] == '-' || b[j] == '/') {
			j++
			if j < len(b) && b[j] == ' ' {
				j++
			}
		}
		if j == i || j >= len(b) || b[j] < '0' || b[j] > '9' {
			return a, i, digits
		}
		i = j
	}
}

// isDigitSep reports a byte that separates the digit groups of a number in the normal form.
func isDigitSep(c byte) bool { return c == ' ' || c == '-' || c == '.' || c == '/' }

// isAlnum reports an ASCII letter, digit or '_', as the regexps' \b does: a number glued to a
// letter of a script written without spaces ("カード4111111111111111です", "电话13812345678")
// is still a number.
func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// groupBounds returns the byte offsets at which the groups of m start and end; groups are
// separated by a run of bytes for which sep is true.
func groupBounds(m []byte, sep func(byte) bool) (starts, ends []int) {
	starts = append(starts, 0)
	for i := 0; i < len(m); i++ {
		if sep(m[i]) {
			ends = append(ends, i)
			for i+1 < len(m) && sep(m[i+1]) {
				i++
			}
			starts = append(starts, i+1)
		}
	}
	return starts, append(ends, len(m))
}

// cardGroups reports whether the digit groups of m are grouped as card numbers are printed
// and typed: one group, or a first group of 4 digits and groups of 4 to 6 (4-4-4-4, Amex
// 4-6-5, Diners 4-6-4), the last of any length ("4111 1111 1111 1111 111" for 19 digits).
// "112-4567890-1234567" (an order number) holds a Luhn-valid run by chance, in groups no card
// is written in.
func cardGroups(starts, ends []int) bool {
	if len(starts) == 1 {
		return true
	}
	if ends[0]-starts[0] != 4 {
		return false
	}
	for k := 1; k < len(starts)-1; k++ {
		if n := ends[k] - starts[k]; n < 4 || n > 6 {
			return false
		}
	}
	return ends[len(ends)-1]-starts[len(starts)-1] <= 6
}

// cardNumber reports a card number: 13 to 19 digits, Luhn-valid, and a first digit that card
// schemes use (2 Mastercard, 3 Amex/Diners/JCB, 4 Visa, 5 Mastercard/Maestro, 6 Discover/
// UnionPay/Maestro). Numbers starting 0, 1, 7, 8 or 9 are timestamps (unix milliseconds start
// with 1), tracking and account numbers far more often than cards.
func cardNumber(m []byte) bool {
	for _, c := range m {
		if c >= '0' && c <= '9' {
			if c < '2' || c > '6' {
				return false
			}
			break
		}
	}
	return luhn(string(m))
}

func findCards(b []byte, add func(a, e int)) {
	for i := 0; i < len(b); {
		if b[i] < '0' || b[i] > '9' {
			i++
			continue
		}
		a, e, digits := digitRun(b, i)
		i = e
		if digits < 13 {
			continue
		}
		// A group glued to a word or a longer token ("DE89", a trace id's digits) is not
		// part of a card number; the groups after it may be.
		if a > 0 && isAlnum(b[a-1]) {
			for a < e && !isDigitSep(b[a]) {
				a++
			}
			for a < e && isDigitSep(b[a]) {
				a++
			}
		}
		if e < len(b) && isAlnum(b[e]) {
			for e > a && !isDigitSep(b[e-1]) {
				e--
			}
			for e > a && isDigitSep(b[e-1]) {
				e--
			}
		}
		if e-a < 13 {
			continue
		}
		for _, sp := range cardSpans(b[a:e]) {
			add(a+sp[0], a+sp[1])
		}
	}
}

// cardSpans finds, from left to right, the longest run of whole digit groups in m that is a
// card number. A last group of 3 or 4 digits right after a card number (its CVV) is redacted
// with it. Then any other valid run that those leave partly uncovered is redacted together
// with the one it overlaps: one run of digits in ten passes the Luhn check by chance, so
// groups written before a card number can make a run that takes the card's first groups, and
// its last ones must not go out.
func cardSpans(m []byte) [][2]int {
	starts, ends := groupBounds(m, isDigitSep)
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
			if digits >= 13 && cardGroups(starts[a:k+1], ends[a:k+1]) && cardNumber(m[starts[a]:ends[k]]) {
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
		return nil
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
	out := make([][2]int, len(runs))
	for i, r := range runs {
		out[i] = [2]int{starts[r.first], ends[r.last]}
	}
	return out
}

func maybeCVV(b []byte, run int) bool {
	return run >= 3 && (containsFold(b, "cv") || containsFold(b, "cs") || containsFold(b, "security code") ||
		containsFold(b, "cid") || containsFold(b, "verification"))
}

func findCVVs(b []byte, add func(a, e int)) { regexFinder(cvvRe, 1, nil)(b, add) }

// findIBANs redacts each IBAN: exactly as many characters (separators aside) as its country's
// IBANs have (ISO 13616 registry), upper- or lower-case, grouped by single spaces or dashes,
// when they pass the mod-97 check. What follows an IBAN ("EUR", a second IBAN) is searched
// again. A hand-written scan: the regular expression it replaces took up to 80 characters at
// every word that starts like an IBAN and was slow on text full of them.
func findIBANs(b []byte, add func(a, e int)) {
	compact := make([]byte, 0, 34)
	for i := 0; i+4 <= len(b); i++ {
		if i > 0 && isAlnum(b[i-1]) || !isLetter(b[i]) || !isLetter(b[i+1]) || !isDigit(b[i+2]) || !isDigit(b[i+3]) {
			continue
		}
		want, ok := ibanLength[string([]byte{upper(b[i]), upper(b[i+1])})]
		if !ok {
			continue
		}
		compact = compact[:0]
		j := i
		for j < len(b) && len(compact) < want {
			switch c := b[j]; {
			case isLetter(c) || isDigit(c):
				compact = append(compact, upper(c))
				j++
			case (c == ' ' || c == '-') && j+1 < len(b) && (isLetter(b[j+1]) || isDigit(b[j+1])):
				j++
			default:
				want = -1 // the text ends before the IBAN would
			}
		}
		if len(compact) == want && ibanValid(compact) {
			add(i, j)
			i = j - 1
		}
	}
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// containsFold reports whether b holds sub (lower-case ASCII) in any case.
func containsFold(b []byte, sub string) bool {
	n := len(sub)
outer:
	for i := 0; i+n <= len(b); i++ {
		for j := 0; j < n; j++ {
			c := b[i+j]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				continue outer
			}
		}
		return true
	}
	return false
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
