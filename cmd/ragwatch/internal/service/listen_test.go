package service_test

import (
	"runtime/debug"
	"testing"
	"testing/fstest"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/internal/listen"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// Every listener of `ragwatch run` is capped at what the Go memory limit and the descriptor
// limit allow (listen.Budget), and exports its cap and open connections.
func TestListenersAreCappedFromTheMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(208 << 20) // what a 256 MiB pod derives
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	cfg := testConfig(t)
	a := startEnv(t, cfg, service.WithCgroupFS(fstest.MapFS{})).app
	want := listen.Budget{MemoryLimit: 208 << 20, FDLimit: listen.FDLimit()}.Caps()
	if want.FDLimit >= 4096 && want.PerListener != 69 {
		t.Fatalf("caps %v; want 69 a listener in a 256 MiB pod", want)
	}
	for _, name := range []string{"http", "otlp_grpc", "otlp_http"} {
		labels := map[string]string{"listener": name}
		if got := testutil.Sum(t, a.Registry, "ragwatch_listener_max_connections", labels); got != float64(want.PerListener) {
			t.Errorf("%s: max_connections %v, want %d", name, got, want.PerListener)
		}
		if got := testutil.Series(t, a.Registry, "ragwatch_listener_connections_refused_total", labels); got == nil {
			t.Errorf("%s: no refused_total series", name)
		}
	}
}
