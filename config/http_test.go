package config

import (
	"strings"
	"testing"
)

func TestHTTPAndGRPCListenerKeys(t *testing.T) {
	d := Default()
	if d.HTTP.Endpoint != "0.0.0.0:9464" || d.HTTP.APIEndpoint != "127.0.0.1:9465" {
		t.Errorf("defaults: endpoint %q, api_endpoint %q", d.HTTP.Endpoint, d.HTTP.APIEndpoint)
	}
	for _, tc := range []struct {
		yaml, err string
	}{
		{`http: {api_endpoint: ""}`, ""},
		{`http: {endpoint: "127.0.0.1:0", api_endpoint: "127.0.0.1:0"}`, ""},
		{`http: {endpoint: "0.0.0.0:9464", api_endpoint: "0.0.0.0:9464"}`, "`http.api_endpoint` must differ from `endpoint`; leave it empty to serve the API on `endpoint`"},
		{`http: {api_endpoint: "nohost"}`, "`http.api_endpoint`"},
		{`receivers: {otlp: {max_concurrent_streams: 16}}`, ""},
		{`receivers: {otlp: {max_concurrent_streams: -1}}`, "`receivers.otlp.max_concurrent_streams` must be between 0 and 1048576"},
	} {
		_, err := Parse([]byte(tc.yaml))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.yaml, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: err = %v, want %q", tc.yaml, err, tc.err)
		}
	}
}
