package natsconn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/secret"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestConnectErrorHidesURLPassword points nats.url, written without a scheme as NATS allows,
// at a port nobody listens on: the start-up error names where it tried, never the password.
func TestConnectErrorHidesURLPassword(t *testing.T) {
	addr := testutil.FreeAddr(t)
	for _, url := range []string{"ragwatch:pw-s3cret@" + addr, "nats://ragwatch:pw-s3cret@" + addr} {
		cfg := DefaultConfig()
		cfg.URL = secret.URL(url)
		cfg.ConnectTimeout = 2 * time.Second
		_, err := Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
		if err == nil {
			t.Fatalf("%s: connected to a closed port", url)
		}
		if strings.Contains(err.Error(), "pw-s3cret") || !strings.Contains(err.Error(), "<redacted>@"+addr) {
			t.Errorf("%s: error %q shows the password or not the address", url, err)
		}
	}
}
