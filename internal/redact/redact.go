// Package redact removes personal data and secrets from text before it leaves the process
// (judge prompts, embeddings and NLI inputs, NATS score messages, API output, exports):
// e-mail addresses (also internationalised and written "name(at)example.com"), phone numbers,
// payment card numbers (Luhn-checked) and CVV codes, IBANs (mod-97-checked), IP addresses,
// secrets (cloud and API keys, bearer tokens, JWTs, private keys) and custom patterns. The
// detectors search a normal form of the text (see normalise) and the spans they find are
// replaced in the text itself: what holds nothing to redact goes out byte for byte.
package redact

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Built-in detector names, used as the `detector` label.
const (
	Email  = "email"
	Phone  = "phone"
	Card   = "card"
	IBAN   = "iban"
	IP     = "ip"
	Secret = "secret"
)

// Builtins lists the built-in detectors in the order they run. Secrets run first: their
// tokens hold digit runs and dots that other detectors would take a part of.
var Builtins = []string{Secret, Email, Card, IBAN, IP, Phone}

// Pattern is a custom detector: a name (the label value) and a regular expression.
type Pattern struct {
	Name  string
	Regex string
}

// detector finds spans of the normal form to redact. find calls add for each one.
type detector struct {
	name string
	find func(b []byte, add func(a, e int))
	// maybe is a cheap pre-check on the text; find runs only when it passes. nil: always.
	maybe func(b []byte, digitRun int) bool
}

// Redactor replaces detected personal data with "[REDACTED:<detector>]". It is safe for
// concurrent use. A nil *Redactor leaves text unchanged.
type Redactor struct {
	detectors []detector
	counter   *prometheus.CounterVec
}

var (
	ipv4Re = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b`)
	// Groups of hex digits with one or two colons between them ("fe80::1ff:fe23:4567:890a",
	// "2001:db8::"); netip.ParseAddr decides (times and MAC addresses do not parse).
	ipv6Re = regexp.MustCompile(`(?i)\b(?:[0-9a-f]{1,4}:{1,2}){2,7}(?:[0-9a-f]{1,4}\b)?`)
)

// New builds a redactor with the named built-in detectors (nil = all) and custom patterns.
// reg may be nil.
func New(builtins []string, custom []Pattern, reg prometheus.Registerer) (*Redactor, error) {
	if builtins == nil {
		builtins = Builtins
	}
	r := &Redactor{}
	for _, name := range builtins {
		switch name {
		case Secret:
			r.detectors = append(r.detectors, detector{name: Secret, find: findSecrets, maybe: maybeSecret})
		case Email:
			r.detectors = append(r.detectors, detector{name: Email, find: findEmails, maybe: maybeEmail})
		case Card:
			r.detectors = append(r.detectors,
				detector{name: Card, find: findCards, maybe: func(_ []byte, run int) bool { return run >= 13 }},
				detector{name: Card, find: findCVVs, maybe: maybeCVV})
		case IBAN:
			r.detectors = append(r.detectors, detector{name: IBAN, find: findIBANs,
				maybe: func(_ []byte, run int) bool { return run >= 2 }})
		case IP:
			r.detectors = append(r.detectors,
				detector{name: IP, find: regexFinder(ipv4Re, 0, ipValid),
					maybe: func(b []byte, run int) bool { return run >= 4 && slices.Contains(b, '.') }},
				detector{name: IP, find: regexFinder(ipv6Re, 0, ipValid),
					maybe: func(b []byte, _ int) bool { return countByte(b, ':') >= 2 }})
		case Phone:
			r.detectors = append(r.detectors, detector{name: Phone, find: findPhones,
				maybe: func(_ []byte, run int) bool { return run >= 7 }})
		default:
			return nil, fmt.Errorf("unknown redaction detector %q (want one of %s)", name, strings.Join(Builtins, ", "))
		}
	}
	for _, p := range custom {
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			return nil, fmt.Errorf("redaction pattern %q: %w", p.Name, err)
		}
		r.detectors = append(r.detectors, detector{name: p.Name, find: regexFinder(re, 0, nil)})
	}
	r.counter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ragwatch_redactions_total",
		Help: "Pieces of personal data replaced before text left the process, by detector.",
	}, []string{"detector"})
	if reg != nil {
		if err := reg.Register(r.counter); err != nil {
			return nil, fmt.Errorf("register redaction metrics: %w", err)
		}
	}
	return r, nil
}

// regexFinder adds the spans of group (0: the whole match) of every match of re that valid
// (nil: every one) accepts.
func regexFinder(re *regexp.Regexp, group int, valid func(string) bool) func([]byte, func(int, int)) {
	return func(b []byte, add func(int, int)) {
		for _, m := range re.FindAllSubmatchIndex(b, -1) {
			a, e := m[2*group], m[2*group+1]
			if a < 0 || a == e {
				continue
			}
			if valid != nil && !valid(string(b[a:e])) {
				continue
			}
			add(a, e)
		}
	}
}

type found struct {
	a, e int // input range
	name string
}

// String redacts s.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	t := normalise(s)
	run := longestDigitRun(t.b)
	var spans []found
	for _, d := range r.detectors {
		if d.maybe != nil && !d.maybe(t.b, run) {
			continue
		}
		t.own()
		n := 0
		d.find(t.b, func(a, e int) {
			// Masked at once: the next pattern of the same detector does not find it again.
			t.mask(a, e)
			a, e = t.span(a, e)
			spans = append(spans, found{a, e, d.name})
			n++
		})
		if n > 0 {
			r.counter.WithLabelValues(d.name).Add(float64(n))
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(x, y found) int { return x.a - y.a })
	var out strings.Builder
	out.Grow(len(s))
	copied := 0
	for i := 0; i < len(spans); i++ {
		sp := spans[i]
		// A span that reaches into the next (a custom pattern over a redacted one, or two
		// runes of one input character) is merged with it: the first detector names it.
		for i+1 < len(spans) && spans[i+1].a < sp.e {
			sp.e = max(sp.e, spans[i+1].e)
			i++
		}
		if sp.a < copied { // cannot happen after the merge; kept as a guard against a leak
			sp.a = copied
		}
		out.WriteString(s[copied:sp.a])
		out.WriteString("[REDACTED:" + sp.name + "]")
		copied = sp.e
	}
	out.WriteString(s[copied:])
	return out.String()
}

// longestDigitRun returns the most digits found in one run of digits and the separators phone
// and card numbers use; detectors that need many digits skip text without such a run.
func longestDigitRun(s []byte) int {
	best, cur := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			cur++
			if cur > best {
				best = cur
			}
		case c == ' ' || c == '-' || c == '.' || c == '/' || c == '(' || c == ')' || c == '+':
			if i+1 < len(s) && (s[i+1] < '0' || s[i+1] > '9') && !isDigitSep(s[i+1]) && s[i+1] != '(' {
				cur = 0
			}
		default:
			cur = 0
		}
	}
	return best
}

func countByte(b []byte, c byte) int {
	n := 0
	for _, x := range b {
		if x == c {
			n++
		}
	}
	return n
}

func digitsOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// luhn validates a payment card number.
func luhn(s string) bool {
	d := digitsOf(s)
	if len(d) < 13 || len(d) > 19 {
		return false
	}
	sum, double := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}

// ibanValid checks the ISO 13616 mod-97 checksum of an IBAN written in capitals, separators
// removed: the country code and check digits moved to the end, letters read as 10-35, the
// number taken modulo 97 digit by digit.
func ibanValid(s []byte) bool {
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	r := 0
	for k := range s {
		c := s[(k+4)%len(s)]
		switch {
		case c >= '0' && c <= '9':
			r = (r*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			r = (r*100 + int(c-'A'+10)) % 97
		default:
			return false
		}
	}
	return r == 1
}

func ipValid(s string) bool {
	_, err := netip.ParseAddr(strings.TrimRight(s, ":"))
	if err != nil {
		_, err = netip.ParseAddr(s)
	}
	return err == nil
}
