package redact

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// E-mail addresses, internationalised (RFC 6531: letters of any script in the local part and
// the domain; a domain's labels may be in punycode) and in the obfuscated forms people write
// to dodge scrapers: "name(at)example.com", "name [at] example [dot] com", "name AT example
// DOT com". The lower-case spoken form "name at example dot com" is not taken: "look at this
// dot com bubble" reads the same.
const (
	emailLocal = `[\p{L}\p{N}\p{M}._%+\-]+`
	emailLabel = `[\p{L}\p{N}\p{M}](?:[\p{L}\p{N}\p{M}\-]*[\p{L}\p{N}\p{M}])?`
	emailTLD   = `(?:\p{L}[\p{L}\p{M}]+|[xX][nN]--[a-zA-Z0-9\-]+)`
	atWord     = `(?:[(\[{<] ?(?i:at) ?[)\]}>])`
	dotWord    = `(?:[(\[{<] ?(?i:dot) ?[)\]}>])`
)

var emailRes = []*regexp.Regexp{
	regexp.MustCompile(emailLocal + ` ?@ ?` + emailLabel + `(?:\.` + emailLabel + `)*\.` + emailTLD),
	regexp.MustCompile(emailLocal + ` ?` + atWord + ` ?` + emailLabel + `(?:(?: ?` + dotWord + ` ?|\.)` + emailLabel + `)*(?: ?` + dotWord + ` ?|\.)` + emailTLD),
	regexp.MustCompile(emailLocal + ` AT ` + emailLabel + `(?:(?: DOT |\.)` + emailLabel + `)*(?: DOT |\.)` + emailTLD + `\b`),
}

// emailForms reports which forms the text may hold, in one pass: an '@' (plain), an "at" in
// brackets (obfuscated), " AT " (spoken, in capitals).
func emailForms(b []byte) (plain, bracket, spoken bool) {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '@':
			plain = true
		case (c|0x20) == 'a' && i+1 < len(b) && (b[i+1]|0x20) == 't':
			j := i + 2
			if j < len(b) && b[j] == ' ' {
				j++
			}
			if j < len(b) && (b[j] == ')' || b[j] == ']' || b[j] == '}' || b[j] == '>') {
				bracket = true
			}
			if c == 'A' && b[i+1] == 'T' && i > 0 && b[i-1] == ' ' && i+2 < len(b) && b[i+2] == ' ' {
				spoken = true
			}
		}
	}
	return plain, bracket, spoken
}

// emailAt is the plain form anchored at the start of the local part.
var emailAt = regexp.MustCompile(`^` + emailLocal + ` ?@ ?` + emailLabel + `(?:\.` + emailLabel + `)*\.` + emailTLD)

// localStart returns where the local part ending before b[at] (an '@', maybe after one space)
// starts: the characters emailLocal takes, back to lo, at most 64 runes.
func localStart(b []byte, lo, at int) int {
	i := at
	if i > lo && b[i-1] == ' ' {
		i--
	}
	for n := 0; i > lo && n < 64; n++ {
		r, size := utf8.DecodeLastRune(b[lo:i])
		if !(unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) || strings.ContainsRune("._%+-", r)) {
			break
		}
		i -= size
	}
	return i
}

func maybeEmail(b []byte, _ int) bool {
	p, br, sp := emailForms(b)
	return p || br || sp
}

func findEmails(b []byte, add func(a, e int)) {
	plain, bracket, spoken := emailForms(b)
	if plain {
		// The regexp starts with a character class, so it would be tried at every byte:
		// find where the local part before each '@' starts by hand and match from there
		// (a domain is at most 255 bytes).
		end := 0
		for i := 0; i < len(b); i++ {
			if b[i] != '@' || i < end {
				continue
			}
			a := localStart(b, end, i)
			if loc := emailAt.FindIndex(b[a:min(len(b), i+260)]); loc != nil {
				a = trimEmailStart(b, a, a+loc[1])
				add(a, a+loc[1])
				end = a + loc[1]
			}
		}
	}
	for k, on := range []bool{bracket, spoken} {
		if !on {
			continue
		}
		for _, loc := range emailRes[k+1].FindAllIndex(b, -1) {
			add(trimEmailStart(b, loc[0], loc[1]), loc[1])
		}
	}
}

// trimEmailStart leaves leading dots and dashes out: they are the text's, not the address's.
func trimEmailStart(b []byte, a, e int) int {
	for a < e && (b[a] == '.' || b[a] == '-') {
		a++
	}
	return a
}
