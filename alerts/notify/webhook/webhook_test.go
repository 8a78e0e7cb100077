package webhook

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/alerts/internal/fixture"
	"github.com/ragwatch/ragwatch/config"
)

func TestWireFormatAndSignature(t *testing.T) {
	type got struct {
		body, ts, sig string
	}
	var reqs []got
	status := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs = append(reqs, got{string(b), r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature)})
		w.WriteHeader(status)
	}))
	defer srv.Close()
	now := time.Unix(1772366400, 0)
	n := New(Config{Name: "audit", URL: config.Secret(srv.URL), Secret: "s3cret"}, srv.Client(), func() time.Time { return now })
	ctx := context.Background()
	if _, err := n.Notify(ctx, fixture.Alert()); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Notify(ctx, fixture.Resolved()); err != nil {
		t.Fatal(err)
	}
	r := reqs[0]
	if r.ts != "1772366400" {
		t.Fatalf("timestamp %q", r.ts)
	}
	// Independent HMAC: sha256=hex(HMAC(secret, ts.body)), checked with a known vector too.
	if !Verify([]byte("s3cret"), r.ts, []byte(r.body), r.sig) || Verify([]byte("other"), r.ts, []byte(r.body), r.sig) {
		t.Fatalf("signature %q does not verify", r.sig)
	}
	if s := Sign([]byte("key"), "1", []byte("body")); s != "sha256=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5" {
		t.Fatalf("sign format %q", s)
	}
	var m struct {
		Version string         `json:"version"`
		Status  string         `json:"status"`
		Alert   map[string]any `json:"alert"`
	}
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != "1" || m.Status != "firing" || m.Alert["rule"] != "citation-precision" || m.Alert["window"] != "15m" ||
		m.Alert["fingerprint"] != fixture.Alert().Fingerprint || len(m.Alert["evidence"].([]any)) != 2 {
		t.Fatalf("body: %s", r.body)
	}
	if d, _ := m.Alert["diagnosis"].(map[string]any); d == nil || d["pattern"] != "retrieval_shift" || len(d["numbers"].([]any)) != 2 {
		t.Fatalf("diagnosis in body: %s", r.body)
	}
	if err := json.Unmarshal([]byte(reqs[1].body), &m); err != nil || m.Status != "resolved" || m.Alert["ends_at"] != "2026-03-01T12:20:00Z" {
		t.Fatalf("resolved body: %s", reqs[1].body)
	}
	for code, wantRetry := range map[int]bool{503: true, 429: true, 400: false, 401: false} {
		status = code
		retry, err := n.Notify(ctx, fixture.Alert())
		if err == nil || retry != wantRetry {
			t.Errorf("HTTP %d: retry=%v err=%v", code, retry, err)
		}
	}
}

func TestUnsignedWithoutSecret(t *testing.T) {
	var sig string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sig = r.Header.Get(HeaderSignature) }))
	defer srv.Close()
	n := New(Config{Name: "w", URL: config.Secret(srv.URL)}, srv.Client(), nil)
	if _, err := n.Notify(context.Background(), fixture.Alert()); err != nil || sig != "" {
		t.Fatalf("sig %q err %v", sig, err)
	}
}

// TestChangeBody: the webhook body carries change_time (RFC 3339) and the levels with their
// intervals.
func TestChangeBody(t *testing.T) {
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
	}))
	defer srv.Close()
	n := New(Config{Name: "audit", URL: config.Secret(srv.URL)}, srv.Client(), time.Now)
	if _, err := n.Notify(context.Background(), fixture.Change()); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Alert struct {
			ChangeTime  string `json:"change_time"`
			LevelBefore struct {
				Value    float64 `json:"value"`
				N        int64   `json:"n"`
				Interval struct {
					Lower, Upper, Level float64
				} `json:"interval"`
			} `json:"level_before"`
			LevelAfter struct {
				Value float64 `json:"value"`
			} `json:"level_after"`
		} `json:"alert"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	a := m.Alert
	if a.ChangeTime != "2026-03-01T11:59:20Z" || a.LevelBefore.Value != 0.95 || a.LevelBefore.N != 12000 ||
		a.LevelBefore.Interval.Lower != 0.94 || a.LevelBefore.Interval.Level != 0.95 || a.LevelAfter.Value != 0.55 {
		t.Fatalf("body: %s", body)
	}
}
