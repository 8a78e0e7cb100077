package secret

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://user:pw@nats-1:4222,nats://user:pw@nats-2:4222": "nats://<redacted>@nats-1:4222,nats://<redacted>@nats-2:4222",
		"https://hooks.slack.com/services/T0/B0/xyz":            "https://hooks.slack.com/<redacted>",
		"http://alertmanager:9093":                              "http://alertmanager:9093",
		"http://alertmanager:9093/":                             "http://alertmanager:9093",
		"https://api.example.com/?key=abc":                      "https://api.example.com/<redacted>",
		"https://api.example.com#frag":                          "https://api.example.com/<redacted>",
		"not a url":                                             "<redacted>",
		"":                                                      "",
		// NATS and OTLP/gRPC take host:port and user:pass@host:port without a scheme.
		"nats-1:4222":                       "nats-1:4222",
		"u:pw@nats-1:4222":                  "<redacted>@nats-1:4222",
		"u:pw@nats-1:4222,u:pw@nats-2:4222": "<redacted>@nats-1:4222,<redacted>@nats-2:4222",
		"tok3n@nats-1":                      "<redacted>@nats-1",
		"sk-live-abcdef":                    "<redacted>", // a bare token is no host:port
		// A credential holding characters that end the user info or split the list must not
		// leave part of itself where the host or a second URL is shown.
		"nats://u:p@ss/w0rd@nats-1:4222":                 "<redacted>",
		"nats://u:1?2@nats-1:4222":                       "<redacted>",
		"nats://u:1#2@nats-1:4222":                       "<redacted>",
		"nats://u:12,34@nats-1:4222":                     "<redacted>",
		"nats://u:p%zz@nats-1:4222":                      "<redacted>",
		"nats://u:p@ss@nats-1:4222":                      "nats://<redacted>@nats-1:4222",
		"https://otel.example:4318/v1/metrics?api-key=k": "https://otel.example:4318/<redacted>",
	} {
		u := URL(in)
		if got := u.String(); got != want {
			t.Errorf("URL(%q).String() = %q, want %q", in, got, want)
		}
		if got := fmt.Sprintf("%v|%s|%#v", u, u, u); got != want+"|"+want+"|"+want {
			t.Errorf("URL(%q) formatted = %q", in, got)
		}
		if u.Reveal() != in {
			t.Errorf("Reveal() = %q, want %q", u.Reveal(), in)
		}
	}
	if s := Secret(""); mustJSON(t, s) != `""` || mustYAML(t, s) != "\"\"\n" {
		t.Errorf("an unset secret marshals as %s / %s, want empty", mustJSON(t, s), mustYAML(t, s))
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := Secret("pw-s3cret")
	for _, got := range []string{s.String(), fmt.Sprintf("%v|%s|%#v|%+v", s, s, s, s), mustJSON(t, s), mustYAML(t, s),
		mustJSON(t, struct{ P Secret }{s})} {
		if got == "" || strings.Contains(got, "s3cret") {
			t.Errorf("printed as %q", got)
		}
	}
	if s.Reveal() != "pw-s3cret" {
		t.Errorf("Reveal() = %q", s.Reveal())
	}
}

func TestRead(t *testing.T) {
	t.Setenv("RAGWATCH_TEST_SECRET", "from-env")
	file := t.TempDir() + "/pw"
	if err := os.WriteFile(file, []byte("  from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ env, file, want, err string }{
		{"RAGWATCH_TEST_SECRET", "", "from-env", ""},
		{"", file, "from-file", ""},
		{"", "", "", ""},
		{"RAGWATCH_TEST_UNSET_SECRET", "", "", "environment variable RAGWATCH_TEST_UNSET_SECRET is not set"},
		{"RAGWATCH_TEST_SECRET", file, "", "set either the env var or the file, not both"},
	} {
		got, err := Read(c.env, c.file)
		if got.Reveal() != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("Read(%q, %q) = %q, %v; want %q, %q", c.env, c.file, got.Reveal(), err, c.want, c.err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
