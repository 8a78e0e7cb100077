package redact

import (
	"regexp"
	"slices"
)

// Secrets: the token formats of cloud and API providers, bearer tokens, JWTs and private key
// blocks. The formats (prefixes, alphabets, lengths) are those of the gitleaks default rule
// set (github.com/gitleaks/gitleaks, MIT licence); each pattern names the rule ids it follows.
// They are written here rather than imported: the gitleaks module would bring its whole
// scanner and ~200 rules into a binary that counts its MiB, and most of those rules key on
// assignments in source files ("api_key = …"), not on tokens pasted into a chat. The
// patterns are matched on the normal form (white space is one space), so a private key block
// whose lines were joined is still one match.
var secretRes = []struct {
	gate  []string // the pattern runs only on text holding one of these (ASCII case ignored)
	re    *regexp.Regexp
	group int // the group to redact; 0: the whole match
}{
	// private-key
	{[]string{"-----begin"}, regexp.MustCompile(`-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=:,. \-]*)`), 0},
	// jwt: header and payload are base64url JSON objects, so both start "eyJ".
	{[]string{"eyj"}, regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*`), 0},
	// aws-access-token
	{[]string{"akia", "asia", "a3t", "abia", "acca"}, regexp.MustCompile(`\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b`), 0},
	// An AWS secret access key (40 characters of base64) after its name; without a name
	// a 40-character token is taken only next to an access key id, below.
	{[]string{"secret", "private"}, regexp.MustCompile(`(?i)(?:aws|amazon)[a-z_\- .]{0,20}(?:secret|private)[a-z_\- .]{0,20}(?:key)?[a-z_\-]{0,10}["']? ?(?:[:=]|=>|is)? ?["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`), 1},
	// github-pat, github-oauth, github-app-token, github-refresh-token, github-fine-grained-pat
	{[]string{"_"}, regexp.MustCompile(`\b(?:gh[pousr]_[0-9A-Za-z]{36}|github_pat_[0-9A-Za-z_]{22,})\b`), 0},
	// slack-bot-token, slack-user-token, slack-legacy-*-token, slack-app-token, slack-webhook-url
	{[]string{"xox", "xapp-", "hooks.slack"}, regexp.MustCompile(`\b(?:xox[baprse]-[0-9A-Za-z\-]{10,}|xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+)|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{20,}`), 0},
	// anthropic-api-key, anthropic-admin-api-key (before openai: both start "sk-")
	{[]string{"sk-ant-"}, regexp.MustCompile(`\bsk-ant-(?:api|admin)\d\d-[A-Za-z0-9_\-]{20,}`), 0},
	// openai-api-key: project, service-account and admin keys, and the legacy form
	{[]string{"sk-"}, regexp.MustCompile(`\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}\b|[A-Za-z0-9]{32,}\b)`), 0},
	// gcp-api-key
	{[]string{"aiza"}, regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}\b`), 0},
	// Bearer and other credentials in an Authorization header (gitleaks curl-auth-header and
	// authorization rules key on the same words); the token must look like one (tokenShape):
	// "Bearer authentication" is prose.
	{[]string{"bearer", "authorization"}, regexp.MustCompile(`(?i)\b(?:bearer(?: token)?|authorization: ?(?:basic|token|apikey))(?: |=|: ?)([A-Za-z0-9\-._~+/]{12,}=*)`), 1},
}

// awsSecretRe is a 40-character token of the AWS secret key alphabet, taken when an access
// key id is in the same text.
var awsSecretRe = regexp.MustCompile(`(?:^|[^A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`)

// maybeSecret reports a token of 12 or more characters without a space, or five dashes (a
// private key header): every format above has one, and most prose has none.
func maybeSecret(b []byte, _ int) bool {
	n, dashes := 0, 0
	for _, c := range b {
		if c == '-' {
			if dashes++; dashes == 5 {
				return true // "-----BEGIN": a private key block may have short lines
			}
		} else {
			dashes = 0
		}
		if isAlnum(c) || c == '-' || c == '+' || c == '/' || c == '=' || c == '.' {
			if n++; n >= 12 {
				return true
			}
		} else {
			n = 0
		}
	}
	return false
}

func findSecrets(b []byte, add func(a, e int)) {
	keyID := false
	for i, s := range secretRes {
		if !slices.ContainsFunc(s.gate, func(g string) bool { return containsFold(b, g) }) {
			continue
		}
		var valid func(string) bool
		if i == len(secretRes)-1 { // the Authorization header, last in secretRes
			valid = tokenShape
		}
		regexFinder(s.re, s.group, valid)(b, func(a, e int) {
			if i == 2 { // aws-access-token, third in secretRes
				keyID = true
			}
			add(a, e)
		})
	}
	if !keyID {
		return
	}
	regexFinder(awsSecretRe, 1, awsSecretShape)(b, add)
}

// awsSecretShape keeps tokens that look like a random base64 key: upper- and lower-case
// letters and digits all present (a git commit hash is 40 lower-case hex digits).
func awsSecretShape(s string) bool {
	var up, lo, dg bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		up = up || c >= 'A' && c <= 'Z'
		lo = lo || c >= 'a' && c <= 'z'
		dg = dg || c >= '0' && c <= '9'
	}
	return up && lo && dg
}

// tokenShape keeps a credential after "Bearer" or "Authorization:" that has a digit or both
// upper- and lower-case letters, as generated tokens do; an English word has neither.
func tokenShape(s string) bool {
	var up, lo bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			return true
		}
		up = up || c >= 'A' && c <= 'Z'
		lo = lo || c >= 'a' && c <= 'z'
	}
	return up && lo
}
