// Package redact removes personal data from text before it leaves the process (judge prompts,
// NATS score messages, API output, alert annotations): e-mail addresses, phone numbers, payment
// card numbers (Luhn-checked), IBANs (mod-97-checked), IP addresses and custom patterns.
package redact

import (
	"fmt"
	"math/big"
	"net/netip"
	"regexp"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Built-in detector names, used as the `detector` label.
const (
	Email = "email"
	Phone = "phone"
	Card  = "card"
	IBAN  = "iban"
	IP    = "ip"
)

// Builtins lists the built-in detectors in the order they run.
var Builtins = []string{Email, Card, IBAN, IP, Phone}

// Pattern is a custom detector: a name (the label value) and a regular expression.
type Pattern struct {
	Name  string
	Regex string
}

type detector struct {
	name  string
	re    *regexp.Regexp
	valid func(string) bool // nil: every match counts
	// replace, when set, replaces valid: it returns the match with the personal data in it
	// redacted and how many pieces it redacted. Card and IBAN matches take every group that
	// follows (a CVV, a currency code, a second number): replace finds the numbers inside.
	replace func(m string) (string, int)
	// maybe is a cheap pre-check on the text; the regexp runs only when it passes. nil: always.
	maybe func(s string, digitRun int) bool
}

// Redactor replaces detected personal data with "[REDACTED:<detector>]". It is safe for
// concurrent use. A nil *Redactor leaves text unchanged.
type Redactor struct {
	detectors []detector
	counter   *prometheus.CounterVec
}

var (
	emailRe = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}`)
	// At least 13 digits, optionally grouped by spaces or dashes: the whole run, so that
	// replaceCards sees a card number with whatever is written next to it.
	cardRe = regexp.MustCompile(`\b\d(?:[ \-]?\d){12,}\b`)
	// Up to 80 characters after the check digits: replaceIBANs cuts at the country's length.
	ibanRe = regexp.MustCompile(`\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,80}\b`)
	ipv4Re = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b`)
	ipv6Re = regexp.MustCompile(`(?i)\b(?:[0-9a-f]{1,4}:){2,7}(?::|[0-9a-f]{1,4})(?:[0-9a-f:]*)`)
	// International or national phone numbers: optional +CC, then 7-15 digits with separators.
	phoneRe = regexp.MustCompile(`(?:\+\d{1,3}[ .\-]?)?(?:\(\d{1,4}\)[ .\-]?)?\d{2,4}(?:[ .\-]\d{2,8}){1,4}\b`)
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
		case Email:
			r.detectors = append(r.detectors, detector{name: Email, re: emailRe,
				maybe: func(s string, _ int) bool { return strings.IndexByte(s, '@') >= 0 }})
		case Card:
			r.detectors = append(r.detectors, detector{name: Card, re: cardRe, replace: replaceCards,
				maybe: func(_ string, run int) bool { return run >= 13 }})
		case IBAN:
			r.detectors = append(r.detectors, detector{name: IBAN, re: ibanRe, replace: replaceIBANs,
				maybe: func(_ string, run int) bool { return run >= 2 }})
		case IP:
			r.detectors = append(r.detectors,
				detector{name: IP, re: ipv4Re, valid: ipValid,
					maybe: func(s string, run int) bool { return run >= 4 && strings.IndexByte(s, '.') >= 0 }},
				detector{name: IP, re: ipv6Re, valid: ipValid,
					maybe: func(s string, _ int) bool { return strings.Count(s, ":") >= 2 }})
		case Phone:
			r.detectors = append(r.detectors, detector{name: Phone, re: phoneRe, valid: phoneValid,
				maybe: func(_ string, run int) bool { return run >= 7 }})
		default:
			return nil, fmt.Errorf("unknown redaction detector %q (want one of %s)", name, strings.Join(Builtins, ", "))
		}
	}
	for _, p := range custom {
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			return nil, fmt.Errorf("redaction pattern %q: %w", p.Name, err)
		}
		r.detectors = append(r.detectors, detector{name: p.Name, re: re})
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

// String redacts s.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	run := longestDigitRun(s)
	for _, d := range r.detectors {
		if d.maybe != nil && !d.maybe(s, run) {
			continue
		}
		if !d.re.MatchString(s) {
			continue
		}
		n := 0
		s = d.re.ReplaceAllStringFunc(s, func(m string) string {
			if d.replace != nil {
				out, k := d.replace(m)
				n += k
				return out
			}
			if d.valid != nil && !d.valid(m) {
				return m
			}
			n++
			return "[REDACTED:" + d.name + "]"
		})
		if n > 0 {
			r.counter.WithLabelValues(d.name).Add(float64(n))
		}
	}
	return s
}

// longestDigitRun returns the most digits found in one run of digits and the separators phone
// and card numbers use; detectors that need many digits skip text without such a run.
func longestDigitRun(s string) int {
	best, cur := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			cur++
			if cur > best {
				best = cur
			}
		case c == ' ' || c == '-' || c == '.' || c == '(' || c == ')' || c == '+':
			if i+1 < len(s) && (s[i+1] < '0' || s[i+1] > '9') && s[i+1] != '(' && s[i+1] != ' ' {
				cur = 0
			}
		default:
			cur = 0
		}
	}
	return best
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

// ibanValid checks the ISO 13616 mod-97 checksum.
func ibanValid(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	re := s[4:] + s[:4]
	var b strings.Builder
	for _, c := range re {
		switch {
		case c >= '0' && c <= '9':
			b.WriteRune(c)
		case c >= 'A' && c <= 'Z':
			fmt.Fprintf(&b, "%d", c-'A'+10)
		default:
			return false
		}
	}
	n, ok := new(big.Int).SetString(b.String(), 10)
	return ok && new(big.Int).Mod(n, big.NewInt(97)).Int64() == 1
}

func ipValid(s string) bool {
	_, err := netip.ParseAddr(strings.TrimRight(s, ":"))
	if err != nil {
		_, err = netip.ParseAddr(s)
	}
	return err == nil
}

// phoneValid keeps numbers of 7 to 15 digits, the E.164 range, and leaves dates, versions and
// amounts alone.
func phoneValid(s string) bool {
	d := digitsOf(s)
	if len(d) < 7 || len(d) > 15 {
		return false
	}
	// Dates like 2026-11-29 and times are not phone numbers.
	if len(d) == 8 && (strings.Count(s, "-") == 2 || strings.Count(s, ".") == 2) && (strings.HasPrefix(d, "19") || strings.HasPrefix(d, "20")) {
		return false
	}
	return strings.HasPrefix(strings.TrimSpace(s), "+") || strings.ContainsAny(s, " -().") || len(d) >= 10
}
