package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxReplyBytes bounds a reply body read into memory. An embeddings reply for a scorer's few
// texts is well under a megabyte even at 3,072 dimensions; a chat reply is a short JSON object.
const maxReplyBytes = 16 << 20

// maxErrorBody bounds the error body an *APIError keeps for its backend's checks.
const maxErrorBody = 4 << 10

// PostJSON sends in as a JSON POST to url with header added, and decodes a 2xx reply's JSON
// body into out. Any other status is an *APIError with the status, the server's Retry-After
// and the vendor's error.message (OpenAI and Anthropic both nest their message there). A body
// that is not JSON, or is larger than 16 MiB, is an error that is not Retryable; a dropped
// connection is.
//
// The backends speak their vendor's wire format with PostJSON and plain structs rather than
// the vendors' SDKs: the two SDKs cost about 26 MB of binary and 10 MiB of resident memory
// in every pod (docs/performance-history.md, "The LLM backends without vendor SDKs") for the three
// endpoints the judges call.
func PostJSON(ctx context.Context, c *http.Client, url string, header http.Header, in, out any, now func() time.Time) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil { // the parse error would quote the URL, which may hold a key
		return errors.New("the endpoint is not a valid URL")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return redactURL(err, req.URL)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	if err != nil {
		return fmt.Errorf("read reply: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if now == nil {
			now = time.Now
		}
		return newAPIError(resp, data, now())
	}
	if len(data) > maxReplyBytes {
		return fmt.Errorf("reply larger than %d bytes", maxReplyBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode reply: %w", err)
	}
	return nil
}

// newAPIError reads an error reply: OpenAI's `{"error":{"message","type","param","code"}}`
// and Anthropic's `{"type":"error","error":{"type","message"}}` both carry error.message.
func newAPIError(resp *http.Response, body []byte, now time.Time) *APIError {
	e := &APIError{Status: resp.StatusCode, RetryAfter: ParseRetryAfter(resp.Header, now)}
	e.Body = string(body[:min(len(body), maxErrorBody)])
	var wire struct {
		Error json.RawMessage `json:"error"`
	}
	var inner struct {
		Message string `json:"message"`
	}
	switch {
	case json.Unmarshal(body, &wire) == nil && json.Unmarshal(wire.Error, &inner) == nil && inner.Message != "":
		e.Message = ShortMessage(inner.Message)
	case json.Unmarshal(wire.Error, &e.Message) == nil: // {"error":"text"}, as some compatible servers send
		e.Message = ShortMessage(e.Message)
	default:
		e.Message = ShortMessage(e.Body)
	}
	return e
}

// redactURL takes the user info and the query out of the URL a transport error names: a base
// URL may carry a password or a key (`?api-key=`), and these errors are logged and written
// into dead-letter headers.
func redactURL(err error, u *url.URL) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		safe := *u
		safe.User, safe.RawQuery, safe.ForceQuery = nil, "", false
		ue.URL = safe.String()
	}
	return err
}

// JoinURL joins a base URL (".../v1" or ".../v1/", perhaps with a query) and an endpoint's
// path. A base that is not a URL is joined as text, and PostJSON reports it.
func JoinURL(base, path string) string {
	u, err := url.JoinPath(base, path)
	if err != nil {
		return strings.TrimSuffix(base, "/") + "/" + path
	}
	return u
}
