package llm

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPostJSON sends to an httptest server that answers each case's status and body, and
// checks the request as sent and what PostJSON makes of the reply.
func TestPostJSON(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		status  int
		header  map[string]string
		body    string
		want    string    // decoded "text" on success
		wantErr *APIError // nil: success; Body is compared when set
		plain   string    // a non-APIError error containing this
	}{
		{name: "ok", status: 200, body: `{"text":"hello","extra":[1,2]}`, want: "hello"},
		{name: "openai error", status: 400, body: `{"error":{"message":"Invalid value for 'response_format'.","type":"invalid_request_error","param":"response_format","code":null}}`,
			wantErr: &APIError{Status: 400, Message: "Invalid value for 'response_format'.",
				Body: `{"error":{"message":"Invalid value for 'response_format'.","type":"invalid_request_error","param":"response_format","code":null}}`}},
		{name: "anthropic error", status: 429, header: map[string]string{"Retry-After": "7"},
			body:    `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			wantErr: &APIError{Status: 429, RetryAfter: 7 * time.Second, Message: "Number of request tokens has exceeded your per-minute rate limit"}},
		{name: "string error", status: 503, body: `{"error":"model is loading"}`, wantErr: &APIError{Status: 503, Message: "model is loading"}},
		{name: "not json", status: 502, body: "<html>\n  bad   gateway\n</html>", wantErr: &APIError{Status: 502, Message: "<html> bad gateway </html>"}},
		{name: "ms retry", status: 429, header: map[string]string{"Retry-After-Ms": "1500"}, body: `{}`, wantErr: &APIError{Status: 429, RetryAfter: 1500 * time.Millisecond, Message: "{}"}},
		{name: "html on 200", status: 200, body: "<html>gateway</html>", plain: "decode reply"},
		{name: "too large", status: 200, body: `{"text":"` + strings.Repeat("x", maxReplyBytes) + `"}`, plain: "reply larger than 16777216 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got struct {
				method, path, ctype, auth, body string
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got.method, got.path, got.ctype, got.auth, got.body = r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(b)
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			var out struct {
				Text string `json:"text"`
			}
			err := PostJSON(context.Background(), srv.Client(), srv.URL+"/v1/x", http.Header{"Authorization": {"Bearer k"}},
				map[string]any{"temperature": 0}, &out, func() time.Time { return now })
			if got.method != "POST" || got.path != "/v1/x" || got.ctype != "application/json" || got.auth != "Bearer k" || got.body != `{"temperature":0}` {
				t.Fatalf("request %+v", got)
			}
			switch {
			case tt.wantErr != nil:
				var ae *APIError
				if !errors.As(err, &ae) {
					t.Fatalf("err %v, want an *APIError", err)
				}
				if tt.wantErr.Body == "" {
					ae.Body = ""
				}
				if *ae != *tt.wantErr {
					t.Fatalf("err %+v\nwant %+v", *ae, *tt.wantErr)
				}
			case tt.plain != "":
				var ae *APIError
				if err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), tt.plain) || Retryable(err) {
					t.Fatalf("err %v, want a non-retryable error with %q", err, tt.plain)
				}
			default:
				if err != nil || out.Text != tt.want {
					t.Fatalf("out %q err %v", out.Text, err)
				}
			}
		})
	}
}

// TestPostJSONErrorBodyCut keeps 4 KiB of a long error body and 200 bytes of its message.
func TestPostJSONErrorBodyCut(t *testing.T) {
	long := strings.Repeat("a", 10000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"message":"`+long+`"}}`)
	}))
	defer srv.Close()
	var ae *APIError
	if err := PostJSON(context.Background(), nil, srv.URL, nil, struct{}{}, &struct{}{}, nil); !errors.As(err, &ae) {
		t.Fatalf("err %v", err)
	}
	if len(ae.Body) != maxErrorBody || ae.Message != strings.Repeat("a", 200)+"…" || strings.Contains(ae.Error(), ae.Body) {
		t.Fatalf("body %d bytes, message %q", len(ae.Body), ae.Message)
	}
}

// TestPostJSONRedactsURL names the endpoint in a network error without the base URL's
// password and query.
func TestPostJSONRedactsURL(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := strings.Replace(srv.URL, "http://", "http://svc:pw-s3cret@", 1) + "/v1/chat/completions?api-key=key-s3cret"
	srv.Close()
	err := PostJSON(context.Background(), nil, u, nil, struct{}{}, &struct{}{}, nil)
	if err == nil || !Retryable(err) || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "/v1/chat/completions") {
		t.Fatalf("err %v", err)
	}
}

func TestJoinURL(t *testing.T) {
	tests := []struct{ base, path, want string }{
		{"https://api.openai.com/v1/", "chat/completions", "https://api.openai.com/v1/chat/completions"},
		{"https://api.openai.com/v1", "embeddings", "https://api.openai.com/v1/embeddings"},
		{"https://api.anthropic.com/", "v1/messages", "https://api.anthropic.com/v1/messages"},
		{"http://llm.internal:8000/openai/v1/?api-version=2026-01-01", "chat/completions", "http://llm.internal:8000/openai/v1/chat/completions?api-version=2026-01-01"},
	}
	for _, tt := range tests {
		if got := JoinURL(tt.base, tt.path); got != tt.want {
			t.Errorf("JoinURL(%q, %q) = %q, want %q", tt.base, tt.path, got, tt.want)
		}
	}
}

// TestPostJSONBadURL reports a base URL that does not parse without quoting it.
func TestPostJSONBadURL(t *testing.T) {
	err := PostJSON(context.Background(), nil, JoinURL("http://svc:key-s3cret@host:bad port/v1", "x"), nil, struct{}{}, &struct{}{}, nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") || Retryable(err) {
		t.Fatalf("err %v", err)
	}
}
