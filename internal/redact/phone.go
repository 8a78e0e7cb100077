package redact

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
)

// Phone numbers. A run of digits alone says little (order numbers, timestamps, amounts and
// versions are runs of digits too), so only the shapes phone numbers are written in are taken:
//
//   - international: "+" and 8 to 15 digits (E.164: the country code does not start with 0,
//     so "+0.0512345678" is a signed number), grouped any way, "(0)" allowed:
//     "+14155550132", "+44 (0)20 7946 0958", "+81-3-1234-5678", "tel:+14155550132";
//   - international with the 00 prefix: "0044 20 7946 0958", 10 to 15 digits;
//   - an area code in parentheses: "(415)5550132", "(415) 555-0132", "(030) 1234567";
//   - North American: "415-555-0132", "1 415.555.0132" (area and exchange codes start 2-9);
//   - national with a trunk 0: "020 7946 0958", "030/1234567", "06 12 34 56 78", 9 to 12
//     digits, one kind of separator;
//   - 10 or 11 digits written together ("4155550132", "07700900123") only after a word that
//     announces a phone number ("call", "phone", "tel", "mobile", …).
//
// A candidate that is part of a longer token (a version "10.415.555.1234", a time, an id
// after "#") or that follows a word naming another kind of number ("order", "invoice",
// "tracking", "ISBN", …) is left alone, unless a phone word comes first.
var (
	phonePlusRe   = regexp.MustCompile(`\+ ?[1-9]\d{0,2}(?:[ .\-]?(?:\(\d{1,4}\)|\d{1,6})){1,7}`)
	phone00Re     = regexp.MustCompile(`\b00 ?[1-9]\d{0,2}(?:[ .\-]?\d{1,5}){1,6}`)
	phoneParenRe  = regexp.MustCompile(`\((?:0\d{0,4}|[2-9]\d{2})\) ?[.\-]? ?\d{2,4}(?:[ .\-]?\d{2,5}){1,3}`)
	phoneNANPRe   = regexp.MustCompile(`\b(?:1[ .\-])?[2-9]\d{2}[ .\-][2-9]\d{2}[ .\-]\d{4}\b`)
	phoneTrunkRe  = regexp.MustCompile(`\b0[1-9]\d{0,4}(?:[ /\-]\d{2,8}){1,4}\b`)
	phoneSolidRe  = regexp.MustCompile(`\b(?:0\d{9,10}|1?[2-9]\d{9})\b`)
	phoneWords    = []string{"call", "phone", "tel", "telephone", "mobile", "cell", "cellphone", "sms", "text", "whatsapp", "fax", "ring", "dial", "reach", "contact", "handy", "telefon", "tél", "téléphone", "portable"}
	notPhoneWords = []string{"order", "orders", "invoice", "inv", "ticket", "tracking", "track", "isbn", "sku", "serial", "ref", "reference", "id", "version", "build", "po", "case", "account", "acct", "transaction", "txn", "confirmation", "booking", "part", "model", "item", "product", "batch", "lot", "policy", "claim", "customer", "member", "parcel", "shipment", "no", "nr", "request", "job", "run", "trace", "span", "timestamp", "ts", "epoch", "isin", "ean", "upc", "gtin", "zip", "postcode", "code", "pin", "port", "pid", "ndc", "rma"}
	// Units and currencies: a phone number is not followed by one.
	unitWords = []string{"cents", "cent", "usd", "eur", "gbp", "jpy", "chf", "dollars", "euros", "yen", "bytes", "kb", "mb", "gb", "ms", "s", "km", "m", "kg", "users", "items", "records", "requests", "tokens", "points", "times", "rows"}
)

// The words are compared with the normal form of the text, where "é" is "e" and a combining
// accent: put them in the same form.
func init() {
	for _, list := range [][]string{phoneWords, notPhoneWords, unitWords} {
		for i, w := range list {
			list[i] = string(normalise(w).b)
		}
	}
}

func findPhones(b []byte, add func(a, e int)) {
	var taken [][2]int // so that a later shape does not take a part of a number found
	// Each shape needs a byte the text may not have: skip its regexp then.
	hasPlus, hasParen, has00 := slices.Contains(b, '+'), slices.Contains(b, '('), bytes.Contains(b, []byte("00"))
	for i, re := range []*regexp.Regexp{phonePlusRe, phone00Re, phoneParenRe, phoneNANPRe, phoneTrunkRe, phoneSolidRe} {
		if i == 0 && !hasPlus || i == 1 && !has00 || i == 2 && !hasParen {
			continue
		}
		for _, loc := range re.FindAllIndex(b, -1) {
			a, e := loc[0], loc[1]
			m := b[a:e]
			if containsMask(m) || overlaps(taken, a, e) || !phoneEdges(b, a, e, i == 0) {
				continue
			}
			n := countDigits(m)
			switch i {
			case 0: // +
				if n < 8 || n > 15 || thousands(m) {
					continue
				}
			case 1: // 00
				if n < 10 || n > 15 || !oneSeparator(m[2:]) {
					continue
				}
			case 2: // (area)
				if n < 7 || n > 13 {
					continue
				}
			case 3: // NANP
				if !oneSeparator(m) && !nanpMixed(m) {
					continue
				}
			case 4: // trunk 0
				if n < 9 || n > 12 || !oneSeparator(m) {
					continue
				}
			case 5: // solid digits
				if !phoneWordBefore(b, a) {
					continue
				}
			}
			if i != 0 && i != 5 && !phoneWordBefore(b, a) && otherWordBefore(b, a) || unitAfter(b, e) {
				continue
			}
			add(a, e)
			taken = append(taken, [2]int{a, e})
		}
	}
}

// phoneEdges rejects a candidate that continues a longer token: a letter or digit next to
// it, or a separator followed (or preceded) by one ("10.415.555.1234", "12:415…", "#415…").
func phoneEdges(b []byte, a, e int, plus bool) bool {
	if a > 0 {
		c := b[a-1]
		if isAlnum(c) || c == '+' || (!plus && (c == '#' || c == '/' || c == '=' || c == '$')) {
			return false
		}
		// "tel:+1…" and "phone=+1…" are how a '+' number is written in links and forms.
		if !plus && (c == '.' || c == '-' || c == ':' || c == '/' || c == ',') && a > 1 && isAlnum(b[a-2]) {
			return false
		}
	}
	if e < len(b) {
		c := b[e]
		if isAlnum(c) || c == '%' {
			return false
		}
		if (c == '.' || c == '-' || c == ':' || c == '/' || c == ',') && e+1 < len(b) && b[e+1] >= '0' && b[e+1] <= '9' {
			return false
		}
	}
	return true
}

func overlaps(spans [][2]int, a, e int) bool {
	for _, s := range spans {
		if a < s[1] && s[0] < e {
			return true
		}
	}
	return false
}

func containsMask(m []byte) bool {
	for _, c := range m {
		if c == 0 {
			return true
		}
	}
	return false
}

func countDigits(m []byte) int {
	n := 0
	for _, c := range m {
		if c >= '0' && c <= '9' {
			n++
		}
	}
	return n
}

// oneSeparator reports whether the digit groups of m are separated by one kind of separator
// (or none): "01.02.2026 10" mixes two and is a date and a number, not a phone number.
func oneSeparator(m []byte) bool {
	var sep byte
	for _, c := range m {
		if c == ' ' || c == '.' || c == '-' || c == '/' {
			if sep != 0 && c != sep {
				return false
			}
			sep = c
		}
	}
	return true
}

// nanpMixed accepts "415 555-0132": a space, then a dash.
func nanpMixed(m []byte) bool {
	s := string(m)
	return strings.Count(s, " ") == 1 && strings.Count(s, "-") == 1 && strings.Index(s, " ") < strings.Index(s, "-")
}

// thousands reports an amount with a sign: "+12.345.678", "+1 234 567" (every group after
// the first of exactly three digits).
func thousands(m []byte) bool {
	if !strings.ContainsAny(string(m), ".,") {
		return false // "+34 912 345 678" is grouped like an amount, and is a phone number
	}
	groups := strings.FieldsFunc(string(m[1:]), func(r rune) bool { return r == '.' || r == ' ' || r == ',' })
	if len(groups) < 2 {
		return false
	}
	for _, g := range groups[1:] {
		if len(g) != 3 {
			return false
		}
	}
	return len(groups[0]) <= 3
}

// wordsBefore returns up to n lower-case words before b[a], nearest first.
func wordsBefore(b []byte, a, n int) []string {
	lo := max(0, a-48)
	words := strings.FieldsFunc(strings.ToLower(string(b[lo:a])), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 0x80)
	})
	if lo > 0 && len(words) > 0 {
		words = words[1:] // may be cut
	}
	out := make([]string, 0, n)
	for i := len(words) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, words[i])
	}
	return out
}

func phoneWordBefore(b []byte, a int) bool {
	for _, w := range wordsBefore(b, a, 5) {
		for _, p := range phoneWords {
			if w == p {
				return true
			}
		}
	}
	return false
}

// unitAfter reports a unit or currency right after b[:e]: "415 555 0132 cents" is an amount.
func unitAfter(b []byte, e int) bool {
	rest := b[e:]
	for len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	n := 0
	for n < len(rest) && (rest[n] >= 'a' && rest[n] <= 'z' || rest[n] >= 'A' && rest[n] <= 'Z') {
		n++
	}
	w := strings.ToLower(string(rest[:n]))
	for _, u := range unitWords {
		if w == u {
			return true
		}
	}
	return false
}

func otherWordBefore(b []byte, a int) bool {
	for _, w := range wordsBefore(b, a, 3) {
		for _, p := range notPhoneWords {
			if w == p {
				return true
			}
		}
	}
	return false
}
