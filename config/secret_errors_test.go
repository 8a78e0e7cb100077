package config

import (
	"strings"
	"testing"
)

// TestURLErrorsHideCredentials loads configs whose credential-carrying URLs are invalid and
// checks that the validation error names the key without echoing the credential.
func TestURLErrorsHideCredentials(t *testing.T) {
	for _, tc := range []struct{ name, yaml, key string }{
		{"nats url that does not parse", `nats: {url: "nats://ragwatch:pa ss-s3cret@nats-1:4222"}`, "nats.url"},
		{"nats url with a wrong scheme", `nats: {url: "http://ragwatch:pass-s3cret@nats-1:4222"}`, "nats.url"},
		{"nli url with a wrong scheme", "scoring:\n  nli: {backend: http, url: \"ftp://u:pass-s3cret@nli:21/?key=pass-s3cret\"}", "scoring.nli.url"},
		{"judge base_url that does not parse", "scoring:\n  backend: openai\n  openai: {model: m, base_url: \"https://u:pass-s3cret@judge/v1%zz\"}", "scoring.openai.base_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err = %v, want one naming %s", err, tc.key)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error shows the credential: %v", err)
			}
		})
	}
}

// TestTypeErrorsDoNotQuoteTheValue: a secret pasted where a section, a number or a list
// belongs is a type error that names the key and line without quoting the value (issue 46:
// the value sk-LEAK... was quoted).
func TestTypeErrorsDoNotQuoteTheValue(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"a key in place of its section", "scoring:\n  openai: sk-LEAKED-0123456789\n", "line 2: `scoring.openai` cannot decode !!str into config.LLMBackend"},
		{"a short key in place of a number", "scoring:\n  workers: sk-LEAK\n", "line 2: `scoring.workers` cannot decode !!str into int"},
		{"a key with a backtick", "scoring:\n  workers: \"sk-`LEAK`-0123456789\"\n", "line 2: `scoring.workers` cannot decode !!str into int"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "LEAK") || strings.Contains(err.Error(), "sk-") {
				t.Errorf("the error quotes the value: %v", err)
			}
		})
	}
}
