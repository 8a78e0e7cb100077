// Package httpsend posts a notification and classifies the outcome the same way for every
// notifier: retry on 429, 5xx and network errors, never on other 4xx. Errors never carry the
// URL (it may hold a credential) or the request body.
package httpsend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Post sends body to target with the headers and reports whether a failure is worth retrying.
func Post(ctx context.Context, client *http.Client, target string, body []byte, header http.Header) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return false, errors.New("build request: invalid URL")
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "ragwatch")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // drop "Post <url>:"
		}
		if ctx.Err() != nil {
			return false, fmt.Errorf("send: %w", ctx.Err())
		}
		return true, fmt.Errorf("send: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return false, fmt.Errorf("HTTP %d (not retried)", resp.StatusCode)
}
