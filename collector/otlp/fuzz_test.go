package otlp

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/ingest"
)

// fuzzHandler is the HTTP receiver's handler without a listener: the whole decode, validate
// and consume path.
func fuzzHandler(f *testing.F) http.Handler {
	r, err := New(Settings{
		Limits:  span.Limits{MaxRequestBytes: 1 << 20},
		Next:    TracesConsumerFunc(func(context.Context, ptrace.Traces) error { return nil }),
		Metrics: ingest.NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		f.Fatal(err)
	}
	return r.HTTPHandler()
}

func fuzzBody(t *testing.T, h http.Handler, contentType string, body []byte) {
	req := httptest.NewRequest(http.MethodPost, TracesPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	switch rec.Code {
	case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
	default:
		t.Fatalf("status %d for %d bytes: %s", rec.Code, len(body), rec.Body.Bytes())
	}
	if rec.Header().Get("Content-Type") != contentType {
		t.Fatalf("Content-Type %q", rec.Header().Get("Content-Type"))
	}
}

func FuzzDecodeProtobuf(f *testing.F) {
	h := fuzzHandler(f)
	f.Add(protoBody(f, traces(1)))
	f.Add(protoBody(f, traces(3))[:20])
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) { fuzzBody(t, h, ctProtobuf, body) })
}

func FuzzDecodeJSON(f *testing.F) {
	h := fuzzHandler(f)
	f.Add(jsonBody(f, traces(1)))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"S/kvNXezTaajzpKdDg5HNg==","spanId":"AAAAAAAAAAE="}]}]}]}`))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b7","attributes":[{"key":"a","value":{"kvlistValue":{"values":[{"key":"b","value":{"arrayValue":{"values":[{"intValue":"1"}]}}}]}}}]}]}]}]}`))
	f.Add([]byte(`[[[[`))
	f.Fuzz(func(t *testing.T, body []byte) { fuzzBody(t, h, ctJSON, body) })
}
