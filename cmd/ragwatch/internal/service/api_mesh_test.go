package service_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// call sends one request and returns the status and body.
func call(t *testing.T, c *http.Client, method, url, host, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestMeshCannotReachTheAPI runs the API on its own listener as shipped (http.api_endpoint)
// and sends what an Istio sidecar delivers: requests from 127.0.0.6 naming another host.
// None gets content or changes anything; the app in the pod (127.0.0.1 to localhost) is
// served, and the metrics listener carries no API.
func TestMeshCannotReachTheAPI(t *testing.T) {
	e := startReloadEnv(t, strings.Replace(fmt.Sprintf(reloadConfig, "0", "0.3", ""), `api_endpoint: ""`, `api_endpoint: "127.0.0.1:0"`, 1))
	addrs := e.app.Addrs()
	if addrs.API == "" || addrs.API == addrs.HTTP {
		t.Fatalf("the API is not on a listener of its own: %+v", addrs)
	}
	api := "http://" + addrs.API
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.6")}}
	mesh := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 10 * time.Second}
	defer mesh.CloseIdleConnections()
	record := `{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","service":"mesh","query":"q","answer":"a"}`
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/config", ""},
		{"GET", "/api/v1/scores", ""},
		{"GET", "/api/v1/alerts", ""},
		{"POST", "/api/v1/records", record},
		{"POST", "/api/v1/feedback", `{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","score":-1}`},
		{"POST", "/api/v1/reload", ""},
	} {
		code, body := call(t, mesh, c.method, api+c.path, "evil.example", "", c.body)
		if code != http.StatusForbidden || strings.Contains(body, "slos") || strings.Contains(body, "alerts\"") {
			t.Errorf("%s %s from 127.0.0.6 = %d %.120q, want 403 without content", c.method, c.path, code, body)
		}
	}
	m := scrape(t, e.base)
	if got := m[`ragwatch_config_reloads_total{outcome="success"}`]; got != 0 {
		t.Errorf("a refused reload ran: %v successes", got)
	}
	if got := testutil.Sum(t, e.app.Registry, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "api", "reason": "unauthenticated"}); got != 6 {
		t.Errorf("api unauthenticated rejections = %v, want 6", got)
	}
	requests := func() float64 {
		return testutil.Sum(t, e.app.Registry, "ragwatch_requests_total", map[string]string{"service": "mesh"})
	}
	if got := requests(); got != 0 {
		t.Errorf("ragwatch_requests_total{service=mesh} = %v after refused writes", got)
	}
	if code, body := call(t, http.DefaultClient, "GET", api+"/api/v1/config", "", "", ""); code != 200 || !strings.Contains(body, "slos") {
		t.Errorf("the app's GET /api/v1/config = %d %.80q", code, body)
	}
	// The same record from the app is counted: the zero above is not a metric that never moves.
	if code, body := call(t, http.DefaultClient, "POST", api+"/api/v1/records", "", "", record); code != http.StatusAccepted {
		t.Fatalf("the app's POST = %d %s", code, body)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the app's record counted", func() bool { return requests() == 1 })
	if code, _ := call(t, mesh, "GET", "http://"+addrs.HTTP+"/api/v1/config", "", "", ""); code != http.StatusNotFound {
		t.Errorf("the API on the metrics listener = %d, want 404", code)
	}
	if code, _ := call(t, mesh, "GET", "http://"+addrs.HTTP+"/metrics", "", "", ""); code != 200 {
		t.Errorf("/metrics from the mesh = %d", code)
	}
}

// TestReloadRotatesTokensAndCertificates: a token removed from its file stops working on the
// API and on OTLP gRPC once the reload answers success, the new one works, and a rotated
// certificate is served from the next handshake. A token file that cannot be read rejects the
// reload.
func TestReloadRotatesTokensAndCertificates(t *testing.T) {
	oldCert, oldKey, oldPool := testCA(t)
	newCert, newKey, newPool := testCA(t)
	newClient := func(pool *x509.CertPool) *http.Client {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, Timeout: 10 * time.Second}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	dir := t.TempDir()
	certFile, keyFile, tokenFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "token")
	copyFile := func(src, dst string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeToken := func(s string) {
		t.Helper()
		if err := os.WriteFile(tokenFile, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(oldCert, certFile)
	copyFile(oldKey, keyFile)
	writeToken("old-token\n")
	yaml := strings.Replace(fmt.Sprintf(reloadConfig, "0", "0.3", ""),
		`receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}`,
		fmt.Sprintf(`receivers: {otlp: {grpc: {endpoint: "127.0.0.1:0", auth: {token_file: %[3]q}}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: "", tls: {cert_file: %[1]q, key_file: %[2]q}, auth: {token_file: %[3]q}}`, certFile, keyFile, tokenFile), 1)
	e := startReloadEnv(t, yaml)
	client := newClient(oldPool) // trusts the first certificate's CA only
	api := "https://" + e.app.Addrs().API

	conn, err := grpc.NewClient(e.app.Addrs().OTLPGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	otlpClient := ptraceotlp.NewGRPCClient(conn)
	export := func(token string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		_, err := otlpClient.Export(ctx, ptraceotlp.NewExportRequestFromTraces(ptrace.NewTraces()))
		return err
	}

	if code, _ := call(t, client, "GET", api+"/api/v1/alerts", "", "old-token", ""); code != 200 {
		t.Fatalf("old token before the rotation = %d", code)
	}
	if err := export("old-token"); err != nil {
		t.Fatalf("OTLP with the old token before the rotation: %v", err)
	}
	if !bytes.Equal(servedCert(t, e.app.Addrs().API), leafOf(t, oldCert)) {
		t.Fatal("not serving the first certificate")
	}

	writeToken("new-token\n")
	copyFile(newCert, certFile)
	copyFile(newKey, keyFile)
	code, body := call(t, client, "POST", api+"/api/v1/reload", "", "old-token", "")
	client = newClient(newPool) // new connections: the rotated certificate's CA
	if code != 200 || !strings.Contains(body, `"status":"success"`) || !strings.Contains(body, `"restart_required":[]`) {
		t.Fatalf("reload = %d %s", code, body)
	}
	if code, _ := call(t, client, "GET", api+"/api/v1/alerts", "", "old-token", ""); code != http.StatusUnauthorized {
		t.Errorf("a revoked token still works after a successful reload: %d", code)
	}
	if code, _ := call(t, client, "GET", api+"/api/v1/alerts", "", "new-token", ""); code != 200 {
		t.Errorf("the new token = %d", code)
	}
	if err := export("old-token"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("OTLP with the revoked token = %v, want Unauthenticated", err)
	}
	if err := export("new-token"); err != nil {
		t.Errorf("OTLP with the new token: %v", err)
	}
	if !bytes.Equal(servedCert(t, e.app.Addrs().API), leafOf(t, newCert)) {
		t.Error("a new handshake after the reload does not see the rotated certificate")
	}

	// A token file that cannot be read rejects the reload; the tokens in force stay.
	writeToken("\n")
	code, body = call(t, client, "POST", api+"/api/v1/reload", "", "new-token", "")
	var answer struct {
		Status string   `json:"status"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || code != 400 || answer.Status != "error" ||
		len(answer.Errors) != 1 || !strings.HasPrefix(answer.Errors[0], "http.auth: bearer token: no token in "+tokenFile) {
		t.Errorf("reload with an empty token file = %d %s", code, body)
	}
	if code, _ := call(t, client, "GET", api+"/api/v1/alerts", "", "new-token", ""); code != 200 {
		t.Errorf("a rejected reload changed the tokens: %d", code)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func leafOf(t *testing.T, certFile string) []byte {
	t.Helper()
	c, err := tls.X509KeyPair(mustRead(t, certFile), mustRead(t, strings.TrimSuffix(certFile, ".pem")+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return c.Certificate[0]
}

// servedCert is the leaf a fresh TLS handshake with addr gets.
func servedCert(t *testing.T, addr string) []byte {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Raw
}
