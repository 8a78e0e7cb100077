package service_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// testCA writes a CA and a server certificate for 127.0.0.1 into a temp dir and returns the
// files and a pool trusting the CA.
func testCA(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	p := testutil.NewPKI(t)
	return p.CertFile, p.KeyFile, p.Pool
}

// TestTLSAndTokensEndToEnd runs the OTLP gRPC receiver and the API with TLS and bearer tokens
// and talks to them with the real OTel exporter and an HTTPS client: a missing or wrong token
// is refused with Unauthenticated / 401 and counted, the right one gets a record assembled.
func TestTLSAndTokensEndToEnd(t *testing.T) {
	certFile, keyFile, pool := testCA(t)
	tokenFile := filepath.Join(t.TempDir(), "tokens")
	// Two tokens: a rotation holds the old and the new one.
	if err := os.WriteFile(tokenFile, []byte("old-token-1\nnew-token-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("S1_API_TOKEN", "api-token-3")
	cfg := testConfig(t)
	cfg.Receivers.OTLP.HTTP.Endpoint = ""
	cfg.Receivers.OTLP.GRPC.TLS.CertFile, cfg.Receivers.OTLP.GRPC.TLS.KeyFile = certFile, keyFile
	cfg.Receivers.OTLP.GRPC.Auth.TokenFile = tokenFile
	cfg.HTTP.TLS.CertFile, cfg.HTTP.TLS.KeyFile = certFile, keyFile
	cfg.HTTP.Auth.TokenEnv = "S1_API_TOKEN"
	sk := &sink{}
	a, err := service.New(cfg, nil, service.WithRecordSink(sk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })

	// One RAG span, recorded in memory, then exported by each exporter under test.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "tls-app"))))
	_, span := tp.Tracer("t").Start(ctx, "handle", trace.WithAttributes(
		attribute.String("rag.query", "Is TLS on?"), attribute.String("rag.answer", "Yes.")))
	span.End()
	spans := rec.Ended()
	tid := spans[0].SpanContext().TraceID().String()

	export := func(headers map[string]string, tlsCfg *tls.Config) error {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(a.Addrs().OTLPGRPC),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
		if tlsCfg != nil {
			opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tlsCfg)))
		} else {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if headers != nil {
			opts = append(opts, otlptracegrpc.WithHeaders(headers))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer exp.Shutdown(ctx)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return exp.ExportSpans(cctx, spans)
	}
	code := func(err error) codes.Code {
		for e := err; e != nil; {
			if st, ok := status.FromError(e); ok {
				return st.Code()
			}
			u, ok := e.(interface{ Unwrap() error })
			if !ok {
				break
			}
			e = u.Unwrap()
		}
		return codes.Unknown
	}
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if err := export(nil, tlsCfg); code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v, want Unauthenticated", err)
	}
	if err := export(map[string]string{"authorization": "Bearer wrong"}, tlsCfg); code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v, want Unauthenticated", err)
	}
	if err := export(map[string]string{"authorization": "Bearer new-token-2"}, nil); err == nil {
		t.Fatal("a plaintext export was accepted by the TLS receiver")
	}
	if err := export(map[string]string{"authorization": "Bearer new-token-2"}, &tls.Config{MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("an export that does not trust the CA succeeded")
	}
	if got := sk.len(); got != 0 {
		t.Fatalf("%d records before an authenticated export", got)
	}
	if err := export(map[string]string{"authorization": "Bearer new-token-2"}, tlsCfg); err != nil {
		t.Fatalf("right token: %v", err)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the record", func() bool { return sk.get(tid) != nil })
	if r := sk.get(tid); r.Query != "Is TLS on?" || r.Answer != "Yes." || r.Service != "tls-app" {
		t.Fatalf("record = %+v", r)
	}

	// The API over HTTPS with its own token.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	base := "https://" + a.Addrs().HTTP
	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/api/v1/alerts", "", http.StatusUnauthorized},
		{"/api/v1/alerts", "new-token-2", http.StatusUnauthorized}, // the OTLP token is not the API's
		{"/api/v1/alerts", "api-token-3", http.StatusOK},
		{"/api/v1/config", "api-token-3", http.StatusOK},
		{"/metrics", "", http.StatusOK}, // scrapers and probes stay open
		{"/healthz", "", http.StatusOK},
	} {
		if got := get(c.path, c.token); got != c.want {
			t.Errorf("GET %s with %q = %d, want %d", c.path, c.token, got, c.want)
		}
	}
	for rcv, want := range map[string]float64{"otlp_grpc": 2, "api": 2} {
		if got := testutil.Sum(t, a.Registry, "ragwatch_ingest_rejected_total", map[string]string{"receiver": rcv, "reason": "unauthenticated"}); got != want {
			t.Errorf("%s unauthenticated rejections = %v, want %v", rcv, got, want)
		}
	}
}
