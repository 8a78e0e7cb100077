package testutil

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Do sends one HTTP request (a Content-Type when contentType is not empty, then header as
// name, value pairs) and returns the status, the headers and the whole body; a transport error
// fails the test.
func Do(tb testing.TB, method, url, contentType, body string, header ...string) (int, http.Header, string) {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}
