package redact

import (
	"strings"
	"testing"
)

// The benchmarks run the built-in detectors on about 1 KB, the size of a sampled answer:
// plain prose (the common case: nothing to redact), support-chat text with personal data in
// it, and non-ASCII prose (every rune goes through the normaliser).
var benchTexts = map[string]string{
	"Clean":   strings.Repeat("Standard storage costs 2 cents per gigabyte per month. ", 18),
	"PII":     strings.Repeat("Hi, I'm jane.doe@example.com, card 4111 1111 1111 1111, call +1 415 555 0132 re order 12345. ", 11),
	"Unicode": strings.Repeat("Der Speicher kostet 2 Cent pro Gigabyte und Monat, grüße aus Köln — ", 15),
}

func benchRedact(b *testing.B, name string) {
	r, err := New(nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	text := benchTexts[name]
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		_ = r.String(text)
	}
}

func BenchmarkRedactClean1KB(b *testing.B)   { benchRedact(b, "Clean") }
func BenchmarkRedactPII1KB(b *testing.B)     { benchRedact(b, "PII") }
func BenchmarkRedactUnicode1KB(b *testing.B) { benchRedact(b, "Unicode") }
