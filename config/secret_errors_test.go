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
