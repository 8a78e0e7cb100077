package natsconn

import (
	"bufio"
	"context"
	"net"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/listen"
)

// TestEmbeddedClientPortIsCapped: the embedded server's client port takes one listener's
// share, like the HTTP and OTLP listeners (issue 46: a connection flood refused NATS along
// with every other intake). With a memory limit that gives the smallest cap, connection
// number cap+1 is refused by the server while the first ones stay open.
func TestEmbeddedClientPortIsCapped(t *testing.T) {
	old := debug.SetMemoryLimit(32 << 20)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	limit := listen.ProcessBudget().Caps().PerListener
	if limit != listen.MinConns {
		t.Fatalf("cap %d under a 32 MiB limit, want %d", limit, listen.MinConns)
	}
	c, err := Connect(context.Background(), embeddedCfg(t), prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := strings.TrimPrefix(c.ClientURL(), "nats://")

	refusedAt := 0
	for i := 1; i <= limit+1; i++ {
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// The server greets every connection with INFO; one over the cap gets the error next
		// and is closed, one within it waits for CONNECT.
		r := bufio.NewReader(conn)
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
			t.Fatalf("connection %d: %q, %v", i, line, err)
		}
		// A short wait: the server closes connections that send no CONNECT within its auth
		// timeout (2 s), which would free places while the test opens them.
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if line, _ := r.ReadString('\n'); strings.Contains(line, "maximum connections exceeded") {
			refusedAt = i
			break
		}
	}
	// ragwatch's own in-process client holds one place.
	if refusedAt == 0 || refusedAt > limit {
		t.Fatalf("refused at connection %d, want at most %d (cap %d)", refusedAt, limit, limit)
	}
	if !c.NC.IsConnected() {
		t.Fatal("ragwatch's own connection was dropped by the flood")
	}
}
