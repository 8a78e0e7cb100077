package listen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts h behind HTTP with lim on a free loopback port; it returns the address and
// the registry its metrics are on.
func serve(t *testing.T, h http.Handler, lim Limits) (string, *prometheus.Registry, *Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, limited, serveLn := HTTP(ln, "test", h, nil, lim, NewMetrics(reg), nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(serveLn); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String(), reg, limited
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

// dial opens a raw connection that sends nothing yet.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// get sends one GET on c and returns the status code.
func get(c net.Conn, extra string) (int, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", extra); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// closedByServer reports whether the server closed c within d (a read returns EOF or reset).
func closedByServer(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func TestHeaderOverTheCapGets431(t *testing.T) {
	addr, _, _ := serve(t, ok, Limits{MaxHeaderBytes: 1 << 10})
	c := dial(t, addr)
	// net/http allows the cap plus its 4 KiB read buffer; 8 KiB is over both.
	code, err := get(c, "X-Big: "+strings.Repeat("a", 8<<10)+"\r\n")
	if err != nil || code != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("8 KiB header: status %d, err %v; want 431", code, err)
	}
	c2 := dial(t, addr)
	if code, err := get(c2, "X-Small: "+strings.Repeat("a", 200)+"\r\n"); err != nil || code != 200 {
		t.Fatalf("200-byte header: status %d, err %v; want 200", code, err)
	}
}

func TestDefaultsBoundEveryServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv, limited, _ := HTTP(ln, "test", ok, nil, Limits{}, nil, nil)
	if srv.MaxHeaderBytes != MaxHeaderBytes || srv.ReadHeaderTimeout != ReadHeaderTimeout ||
		srv.ReadTimeout != ReadTimeout || srv.WriteTimeout != WriteTimeout || srv.IdleTimeout != IdleTimeout {
		t.Fatalf("server limits %d %v %v %v %v", srv.MaxHeaderBytes, srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	if limited.Cap() != DefaultMaxConns {
		t.Fatalf("cap %d, want %d", limited.Cap(), DefaultMaxConns)
	}
}

// At the cap, a new connection takes the place of the one idle longest; the others stay.
func TestAtTheCapTheLongestIdleIsEvicted(t *testing.T) {
	addr, reg, l := serve(t, ok, Limits{MaxConns: 3})
	var held []net.Conn
	for i := range 3 {
		c := dial(t, addr)
		held = append(held, c)
		testutil.Eventually(t, 2*time.Second, time.Millisecond, "connection accepted", func() bool { return l.Open() == i+1 })
	}
	// The second one makes a request and goes back to idle: now the longest idle are 0, 2, 1.
	if code, err := get(held[1], ""); err != nil || code != 200 {
		t.Fatalf("keep-alive request: %d %v", code, err)
	}
	for round, victim := range []int{0, 2} {
		c := dial(t, addr)
		if code, err := get(c, ""); err != nil || code != 200 {
			t.Fatalf("round %d: new connection at the cap: %d %v", round, code, err)
		}
		if !closedByServer(held[victim], 2*time.Second) {
			t.Fatalf("round %d: connection %d (idle longest) still open", round, victim)
		}
		held = append(held, c)
	}
	if closedByServer(held[1], 50*time.Millisecond) {
		t.Fatal("connection 1 was evicted before older idle ones")
	}
	if got := testutil.Sum(t, reg, "ragwatch_listener_connections_evicted_total", map[string]string{"listener": "test"}); got != 2 {
		t.Fatalf("evicted_total = %v, want 2", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_listener_connections", map[string]string{"listener": "test"}); got != 3 {
		t.Fatalf("connections = %v, want 3", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_listener_max_connections", map[string]string{"listener": "test"}); got != 3 {
		t.Fatalf("max_connections = %v, want 3", got)
	}
}

// When every connection is serving a request, the N+1th is refused (closed at once) and
// counted; once one finishes, connections are taken again.
func TestAtTheCapWithAllBusyTheNewOneIsRefused(t *testing.T) {
	release := make(chan struct{})
	var started sync.WaitGroup
	block := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("block") {
			started.Done()
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})
	addr, reg, _ := serve(t, block, Limits{MaxConns: 2})
	var wg sync.WaitGroup
	for range 2 {
		started.Add(1)
		c := dial(t, addr)
		wg.Go(func() {
			if _, err := fmt.Fprint(c, "GET /?block HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Error(err)
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("held request: %v %v", resp, err)
			}
		})
	}
	started.Wait()
	extra := dial(t, addr)
	if !closedByServer(extra, 2*time.Second) {
		t.Fatal("the third connection was not refused while two requests were in flight")
	}
	if got := testutil.Sum(t, reg, "ragwatch_listener_connections_refused_total", map[string]string{"listener": "test"}); got != 1 {
		t.Fatalf("refused_total = %v, want 1", got)
	}
	close(release)
	wg.Wait()
	if code, err := get(dial(t, addr), ""); err != nil || code != 200 {
		t.Fatalf("after the held requests finished: %d %v", code, err)
	}
}

func TestIdleAndSlowHeaderConnectionsAreClosed(t *testing.T) {
	addr, _, l := serve(t, ok, Limits{IdleTimeout: 100 * time.Millisecond, ReadHeaderTimeout: 100 * time.Millisecond})
	idle := dial(t, addr)
	if code, err := get(idle, ""); err != nil || code != 200 {
		t.Fatalf("request: %d %v", code, err)
	}
	slow := dial(t, addr)
	if _, err := io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for name, c := range map[string]net.Conn{"idle keep-alive": idle, "unfinished header": slow} {
		if !closedByServer(c, 2*time.Second) {
			t.Fatalf("%s connection still open after 2s", name)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("closing took %v with 100ms timeouts", took)
	}
	testutil.Eventually(t, 2*time.Second, time.Millisecond, "no connection open", func() bool { return l.Open() == 0 })
}

func TestCaps(t *testing.T) {
	for _, c := range []struct {
		name string
		b    Budget
		want Caps
	}{
		{"nothing known", Budget{}, Caps{PerListener: DefaultMaxConns, By: "default"}},
		// A 256 MiB pod: Go's limit 208 MiB -> 26 MiB for connections, 6.5 MiB a listener.
		{"256 MiB pod", Budget{MemoryLimit: 208 << 20, FDLimit: 1 << 20},
			Caps{PerListener: 69, FDReserve: 1 << 18, By: "memory"}},
		{"tiny memory", Budget{MemoryLimit: 16 << 20}, Caps{PerListener: MinConns, By: "memory"}},
		{"1024 fds, no memory limit", Budget{FDLimit: 1024}, Caps{PerListener: 192, FDReserve: 256, By: "fds"}},
		{"20000 fds, 4 GiB", Budget{MemoryLimit: 4 << 30, FDLimit: 20000}, Caps{PerListener: 1365, FDReserve: 5000, By: "memory"}},
		{"100 fds", Budget{FDLimit: 100}, Caps{PerListener: 1, FDReserve: 256, By: "fds"}},
		{"infinite fds", Budget{FDLimit: ^uint64(0)}, Caps{PerListener: DefaultMaxConns, FDReserve: ^uint64(0) / 4, By: "default"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.want.Budget = c.b
			if got := c.b.Caps(); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
			// The listeners together never reach into the reserve.
			if got := c.b.Caps(); c.b.FDLimit > got.FDReserve+Listeners && uint64(got.PerListener*Listeners) > c.b.FDLimit-got.FDReserve {
				t.Fatalf("%d listeners × %d reach into the reserve of %d of %d", Listeners, got.PerListener, got.FDReserve, c.b.FDLimit)
			}
		})
	}
}

// ConnCost is what the memory cap divides by: check it against what connections that sent
// headers up to the cap and stopped really hold.
func TestConnCost(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 300 connections")
	}
	const n = 300
	addr, _, l := serve(t, ok, Limits{MaxConns: n})
	before := inUse()
	line := "GET / HTTP/1.1\r\nHost: x\r\nX-Fill: " + strings.Repeat("a", MaxHeaderBytes-64)
	for range n {
		c := dial(t, addr)
		if _, err := io.WriteString(c, line); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "connections open", func() bool { return l.Open() == n })
	var per uint64
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, "headers read", func() bool {
		per = (inUse() - before) / n
		return per > MaxHeaderBytes
	})
	t.Logf("%d connections with %d-byte headers unfinished: %d bytes each (ConnCost %d)", n, MaxHeaderBytes-64, per, ConnCost)
	if per > ConnCost {
		t.Fatalf("a connection holds %d bytes, over ConnCost %d", per, ConnCost)
	}
}

// inUse is the heap in use plus goroutine stacks, after a GC.
func inUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// At the cap the victim is the busiest peer's: a flood from one address does not push out
// a connection from another, even an older one.
func TestAtTheCapTheBusiestPeerLosesAConnection(t *testing.T) {
	addr, reg, l := serve(t, ok, Limits{MaxConns: 3})
	from := func(ip string) net.Conn {
		n := l.Open()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		testutil.Eventually(t, 2*time.Second, time.Millisecond, "connection accepted", func() bool { return l.Open() > n || n == l.Cap() })
		return c
	}
	scraper := from("127.0.0.1") // oldest, idle
	flood := []net.Conn{from("127.0.0.2"), from("127.0.0.2")}
	for i := range 3 {
		c := from("127.0.0.2")
		if code, err := get(c, ""); err != nil || code != 200 {
			t.Fatalf("flood connection %d: %d %v", i, code, err)
		}
		flood = append(flood, c)
	}
	if closedByServer(scraper, 100*time.Millisecond) {
		t.Fatal("the other peer's connection was evicted by a flood from 127.0.0.2")
	}
	for i, c := range flood[:3] {
		if !closedByServer(c, 2*time.Second) {
			t.Fatalf("flood connection %d (oldest of the busiest peer) still open", i)
		}
	}
	if code, err := get(scraper, ""); err != nil || code != 200 {
		t.Fatalf("the other peer's request after the flood: %d %v", code, err)
	}
	if got := testutil.Sum(t, reg, "ragwatch_listener_connections_evicted_total", map[string]string{"listener": "test"}); got != 3 {
		t.Fatalf("evicted_total = %v, want 3", got)
	}
}
