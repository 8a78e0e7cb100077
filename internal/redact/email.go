package redact

import (
	"regexp"
	"slices"
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

func maybeEmail(b []byte, _ int) bool {
	return slices.Contains(b, '@') || containsFold(b, "at)") || containsFold(b, "at]") ||
		containsFold(b, "at}") || containsFold(b, "at>") || containsFold(b, "at )") || containsFold(b, "at ]") ||
		containsWord(b, " AT ")
}

func findEmails(b []byte, add func(a, e int)) {
	for _, re := range emailRes {
		for _, loc := range re.FindAllIndex(b, -1) {
			a, e := loc[0], loc[1]
			// A local part starts after a letter or digit only if the regexp left it out:
			// never, it is greedy; leading dots are part of the text, not of the address.
			for a < e && (b[a] == '.' || b[a] == '-') {
				a++
			}
			add(a, e)
		}
	}
}

func containsWord(b []byte, w string) bool {
	n := len(w)
	for i := 0; i+n <= len(b); i++ {
		if string(b[i:i+n]) == w {
			return true
		}
	}
	return false
}
