package redact

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRedactRealisticText(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(nil, []Pattern{{Name: "ticket", Regex: `TCK-\d{6}`}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"email", "Contact jane.doe+billing@example.co.uk about the refund.",
			"Contact [REDACTED:email] about the refund."},
		{"card with spaces (Luhn ok)", "My card 4111 1111 1111 1111 was charged twice.",
			"My card [REDACTED:card] was charged twice."},
		{"card failing Luhn stays", "Order 4111 1111 1111 1112 shipped.",
			"Order 4111 1111 1111 1112 shipped."},
		{"iban", "Please wire it to DE89 3704 0044 0532 0130 00 today.",
			"Please wire it to [REDACTED:iban] today."},
		{"iban bad checksum stays", "Reference DE00 3704 0044 0532 0130 00.",
			"Reference DE00 3704 0044 0532 0130 00."},
		{"ipv4", "Login from 192.168.10.24 failed.", "Login from [REDACTED:ip] failed."},
		{"ipv6", "Client 2001:db8::8a2e:370:7334 connected.", "Client [REDACTED:ip] connected."},
		{"version is not an ip", "Upgrade to 1.2.3 first.", "Upgrade to 1.2.3 first."},
		{"phone international", "Call me at +49 30 1234567 tomorrow.", "Call me at [REDACTED:phone] tomorrow."},
		{"phone us", "Reach support at (415) 555-0132.", "Reach support at [REDACTED:phone]."},
		{"date is not a phone", "It happened on 2026-11-29.", "It happened on 2026-11-29."},
		{"amount is not a phone", "It costs 2 cents per gigabyte.", "It costs 2 cents per gigabyte."},
		{"custom", "See TCK-123456 for details.", "See [REDACTED:ticket] for details."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.String(tc.in); got != tc.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
	for det, want := range map[string]float64{Email: 1, Card: 1, IBAN: 1, IP: 2, Phone: 2, "ticket": 1} {
		if got := testutil.ToFloat64(r.counter.WithLabelValues(det)); got != want {
			t.Errorf("redactions{detector=%q} = %v, want %v", det, got, want)
		}
	}
}

func TestNilRedactorAndUnknownDetector(t *testing.T) {
	var r *Redactor
	if got := r.String("a@b.io"); got != "a@b.io" {
		t.Fatalf("nil redactor changed text: %q", got)
	}
	if _, err := New([]string{"ssn"}, nil, nil); err == nil || !strings.Contains(err.Error(), `unknown redaction detector "ssn"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := New(nil, []Pattern{{Name: "x", Regex: "("}}, nil); err == nil || !strings.Contains(err.Error(), `redaction pattern "x"`) {
		t.Fatalf("err = %v", err)
	}
}

func BenchmarkRedact1KB(b *testing.B) {
	r, _ := New(nil, nil, nil)
	text := strings.Repeat("Standard storage costs 2 cents per gigabyte per month. ", 18)
	b.ReportAllocs()
	for b.Loop() {
		_ = r.String(text)
	}
}
