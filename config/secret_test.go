package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestHideConfigSecrets loads a config that sets every credential field, and checks that no
// credential appears in any printed form of it while the fields around them still show.
// Modelled on Alertmanager's TestHideConfigSecrets.
func TestHideConfigSecrets(t *testing.T) {
	secrets := []string{"hdr-TOKEN-1", "natspass2", "judgepass3", "JUDGEPATH4", "anthkey5", "nlipass6",
		"SLACKTOKEN7", "hooktoken8", "ampass9", "PDPATH10", "rbtoken11", "dashtoken12", "driftpass13", "dashtoken14",
		"tracetoken15", "dashtoken16", "otlppass17", "evalhdr19", "evalpass20", "lfpass21", "pxpass22", "teipass18"}
	c, err := Parse([]byte(`
exporters:
  otlp:
    endpoint: "https://otlp:otlppass17@otel-collector:4318/v1/metrics"
    headers: {authorization: "Bearer hdr-TOKEN-1", x-scope: "hdr-TOKEN-1"}
nats:
  url: "nats://ragwatch:natspass2@nats-1:4222,nats://ragwatch:natspass2@nats-2:4222"
  token_env: NATS_TOKEN
scoring:
  backend: openai
  openai: {model: judge-model, api_key_env: OPENAI_KEY, base_url: "https://u:judgepass3@judge.example.com/v1/JUDGEPATH4"}
  anthropic: {model: claude-model, api_key_file: /run/secrets/anthropic, base_url: "https://anthropic.example.com/?key=anthkey5"}
  nli: {backend: http, url: "http://nli:nlipass6@nli.internal:8080"}
  bertscore: {url: "http://tei:teipass18@tei.internal:8080"}
notifiers:
  - {name: chat, type: slack, url: "https://hooks.slack.com/services/T0/B0/SLACKTOKEN7"}
  - {name: hook, type: webhook, url: "https://hooks.example.com/ragwatch?token=hooktoken8", secret_env: HOOK_HMAC}
  - {name: am, type: alertmanager, url: "http://ops:ampass9@alertmanager:9093"}
  - {name: pd, type: pagerduty, url: "https://events.example.com/PDPATH10", routing_key_env: PD_KEY}
slos:
  - {name: cp, metric: citation_precision, alert_below: 0.7, runbook_url: "https://runbooks.example/cp?token=rbtoken11",
     dashboard_url: "https://grafana.example/d/x?auth_token=dashtoken12"}
comparisons:
  - {name: canary, metrics: [faithfulness], baseline: v1, runbook_url: "https://runbooks.example/canary?token=rbtoken17",
     dashboard_url: "https://grafana.example/d/c?auth_token=dashtoken18"}
drift:
  detectors:
    - {name: scores-ks, signal: retrieval_score, method: ks, buckets: [0, 0.5, 1],
       runbook_url: "https://u:driftpass13@runbooks.example/drift", dashboard_url: "https://grafana.example/d/y?auth_token=dashtoken14"}
evaluations:
  otlp: {endpoint: "https://u:evalpass20@otel-collector:4318/v1/logs", protocol: http, headers: {api-key: evalhdr19}}
  langfuse: {url: "https://u:lfpass21@langfuse.example", public_key_env: LF_PUBLIC, secret_key_file: /run/secrets/lf}
  phoenix: {url: "https://phoenix.example/?key=pxpass22"}
alerting:
  trace_url_template: "https://tempo.example/t/{trace_id}?auth=tracetoken15"
  dashboard_url: "https://grafana.example/d/z?auth_token=dashtoken16"
`))
	if err != nil {
		t.Fatal(err)
	}
	// Every credential field of Config is set above, so a new one without a value here fails
	// this test instead of going untested.
	for _, path := range unsetSecrets(reflect.ValueOf(*c), "") {
		t.Errorf("credential field %s is not set in this test's config", path)
	}

	forms := map[string]string{
		"JSON":   mustJSON(t, c),
		"YAML":   mustYAML(t, c),
		"String": c.String(),
		"%v":     fmt.Sprintf("%v", *c),
		"%+v":    fmt.Sprintf("%+v", *c),
		"%#v":    fmt.Sprintf("%#v", *c),
	}
	shown := []string{"https://<redacted>@otel-collector:4318/<redacted>", "https://runbooks.example/<redacted>",
		"https://grafana.example/<redacted>", "https://<redacted>@runbooks.example/<redacted>", "https://tempo.example/<redacted>", "nats://<redacted>@nats-1:4222", "NATS_TOKEN", "judge-model",
		"OPENAI_KEY", "https://<redacted>@judge.example.com/<redacted>", "/run/secrets/anthropic",
		"https://anthropic.example.com/<redacted>", "http://<redacted>@nli.internal:8080",
		"https://hooks.slack.com/<redacted>", "https://hooks.example.com/<redacted>", "HOOK_HMAC",
		"http://<redacted>@alertmanager:9093", "https://events.example.com/<redacted>", "PD_KEY"}
	for form, text := range forms {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows the secret %q", form, s)
			}
		}
		if form == "JSON" || form == "%v" || form == "%+v" || form == "%#v" {
			continue // Go field names; the YAML forms carry the keys checked below
		}
		for _, s := range shown {
			if !strings.Contains(text, s) {
				t.Errorf("%s lacks %q:\n%s", form, s, text)
			}
		}
	}
	if !strings.Contains(forms["JSON"], `"authorization":"\u003credacted\u003e"`) || !strings.Contains(forms["JSON"], `"Model":"judge-model"`) {
		t.Errorf("JSON: headers not redacted by key, or the model is missing:\n%s", forms["JSON"])
	}
	// The values are intact for the code that sends them.
	if c.Exporters.OTLP.RevealHeaders()["authorization"] != "Bearer hdr-TOKEN-1" ||
		c.Notifiers[0].URL.Reveal() != "https://hooks.slack.com/services/T0/B0/SLACKTOKEN7" ||
		c.NATS.Servers()[1] != "nats://ragwatch:natspass2@nats-2:4222" {
		t.Errorf("revealed values changed: %v %v", c.Exporters.OTLP.RevealHeaders(), c.NATS.Servers())
	}
}

var (
	secretType    = reflect.TypeOf(Secret(""))
	secretURLType = reflect.TypeOf(SecretURL(""))
)

// unsetSecrets lists the paths of credential fields (Secret, SecretURL, maps of them) that are
// empty in v.
func unsetSecrets(v reflect.Value, path string) []string {
	switch {
	case v.Type() == secretType || v.Type() == secretURLType:
		if v.Len() == 0 {
			return []string{path}
		}
		return nil
	case v.Kind() == reflect.Map && (v.Type().Elem() == secretType || v.Type().Elem() == secretURLType):
		if v.Len() == 0 {
			return []string{path}
		}
		return nil
	case v.Kind() == reflect.Struct:
		var out []string
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				out = append(out, unsetSecrets(v.Field(i), path+"."+v.Type().Field(i).Name)...)
			}
		}
		return out
	case v.Kind() == reflect.Slice:
		if v.Len() == 0 && containsSecret(v.Type().Elem()) {
			return []string{path + "[]"}
		}
		var out []string
		for i := 0; i < v.Len(); i++ {
			out = append(out, unsetSecrets(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	return nil
}

func containsSecret(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String:
		return t == secretType || t == secretURLType
	case reflect.Map, reflect.Slice, reflect.Pointer:
		return containsSecret(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if containsSecret(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
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
