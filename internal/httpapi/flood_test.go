package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/ingest"
)

// Both listeners refuse headers over listen.MaxHeaderBytes (32 KiB) with 431, where net/http's
// default let one connection buffer 1 MiB; ordinary headers pass.
func TestHeadersOverTheCapGet431OnBothListeners(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Settings{Endpoint: "127.0.0.1:0", APIEndpoint: "127.0.0.1:0", Gatherer: reg, Metrics: ingest.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	client := &http.Client{Timeout: 5 * time.Second}
	for _, url := range []string{"http://" + s.Addr().String() + "/metrics", "http://" + s.APIAddr().String() + "/api/v1/nothing"} {
		for _, c := range []struct {
			size int
			want int
		}{{64 << 10, http.StatusRequestHeaderFieldsTooLarge}, {1 << 10, 0}} {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("X-Fill", strings.Repeat("a", c.size))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s with a %d-byte header: %v", url, c.size, err)
			}
			_ = resp.Body.Close()
			if c.want != 0 && resp.StatusCode != c.want {
				t.Errorf("%s with a %d-byte header: %d, want %d", url, c.size, resp.StatusCode, c.want)
			}
			if c.want == 0 && resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("%s with a %d-byte header: 431", url, c.size)
			}
		}
	}
}
