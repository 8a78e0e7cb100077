package listen

import (
	"container/list"
	"context"
	"net"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Listener is a net.Listener that holds at most Max connections open. A connection that
// arrives at the cap takes the place of an open connection without a request in flight (idle
// keep-alive, or still sending its headers): of the peer address with the most connections
// open, the one that has gone longest without a request. That one is closed, counted as
// evicted. Only when every open connection is serving a request is the new one closed,
// counted as refused. Accept never blocks on the cap, so the kernel's backlog does not fill
// behind a flood and other listeners are untouched.
//
// Choosing the victim among the busiest peer's connections keeps a flood from one client (a
// compromised pod) from pushing out Prometheus's scrape or the kubelet's probe, which come
// from other addresses; among one peer's connections the oldest goes first, so even a flood
// from the scraper's own address must open Max connections between its connect and its
// request being read to evict it.
//
// A connection is "serving" between Begin and End (the HTTP handler and gRPC stats hooks of
// this package call them). Eviction costs a legitimate client little: an idle keep-alive
// connection is reopened by its client.
type Listener struct {
	net.Listener
	name string
	max  int
	m    *Metrics // nil: not counted

	mu     sync.Mutex // guards the fields below and every Conn's busy, elem and closed
	open   int
	peers  map[netip.Addr]*peer // by remote IP, while it has connections open
	byAddr map[string]*Conn     // by remote address, for the gRPC stats handler
}

// peer is one remote IP's connections.
type peer struct {
	open int
	idle list.List // *Conn not serving a request, longest first
}

// Limit wraps ln so that it holds at most limit connections (below 1 is taken as 1). name is
// the listener's label in the metrics ("http", "api", "otlp_grpc", "otlp_http"); m may be nil.
func Limit(ln net.Listener, name string, limit int, m *Metrics) *Listener {
	l := &Listener{Listener: ln, name: name, max: max(limit, 1), m: m,
		peers: map[netip.Addr]*peer{}, byAddr: map[string]*Conn{}}
	l.m.init(name, l.max)
	return l
}

// Cap is the listener's connection cap.
func (l *Listener) Cap() int { return l.max }

// Open is the number of connections open now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Accept returns the next connection, closing an idle one or the new one when at the cap.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, victim := l.admit(nc)
		if victim != nil {
			_ = victim.Conn.Close() // already untracked: its own Close finds it closed
		}
		if c == nil {
			_ = nc.Close()
			continue
		}
		return c, nil
	}
}

// admit tracks nc, choosing a connection to evict when at the cap; c is nil when every open
// connection is serving a request and nc must be refused.
func (l *Listener) admit(nc net.Conn) (c, victim *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max {
		if victim = l.victim(); victim == nil {
			l.m.refused(l.name)
			return nil, nil
		}
		l.untrack(victim)
		l.m.evicted(l.name)
	}
	c = &Conn{Conn: nc, l: l, ip: remoteIP(nc)}
	p := l.peers[c.ip]
	if p == nil {
		p = &peer{}
		l.peers[c.ip] = p
	}
	p.open++
	c.elem = p.idle.PushBack(c)
	l.byAddr[nc.RemoteAddr().String()] = c
	l.open++
	l.m.set(l.name, l.open)
	return c, victim
}

// victim is the longest idle connection of the peer with the most connections open that has
// an idle one; nil when every connection is serving. l.mu is held. The scan is over the
// peers, at most Max, and only at the cap.
func (l *Listener) victim() *Conn {
	var busiest *peer
	for _, p := range l.peers {
		if p.idle.Len() > 0 && (busiest == nil || p.open > busiest.open) {
			busiest = p
		}
	}
	if busiest == nil {
		return nil
	}
	return busiest.idle.Front().Value.(*Conn)
}

// untrack forgets c; l.mu is held.
func (l *Listener) untrack(c *Conn) {
	if c.closed {
		return
	}
	c.closed = true
	p := l.peers[c.ip]
	if c.elem != nil {
		p.idle.Remove(c.elem)
		c.elem = nil
	}
	if p.open--; p.open == 0 {
		delete(l.peers, c.ip)
	}
	if l.byAddr[c.Conn.RemoteAddr().String()] == c {
		delete(l.byAddr, c.Conn.RemoteAddr().String())
	}
	l.open--
	l.m.set(l.name, l.open)
}

// lookup finds an open connection by its remote address.
func (l *Listener) lookup(remote net.Addr) *Conn {
	if remote == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byAddr[remote.String()]
}

// remoteIP is nc's peer IP; the zero Addr (one peer for all) when it has none (a pipe).
func remoteIP(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// Conn is a connection of a Listener.
type Conn struct {
	net.Conn
	l      *Listener
	ip     netip.Addr
	busy   int           // requests in flight
	elem   *list.Element // in its peer's idle list while busy is 0 and the connection is open
	closed bool
}

// Close closes the connection and frees its place.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.untrack(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// Begin marks a request in flight: the connection cannot be evicted until the matching End.
func (c *Conn) Begin() {
	if c == nil {
		return
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.busy++
	if c.elem != nil {
		c.l.peers[c.ip].idle.Remove(c.elem)
		c.elem = nil
	}
}

// End marks a request done; a connection with none left goes to the back of its peer's idle
// line.
func (c *Conn) End() {
	if c == nil {
		return
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.busy == 0 { // an End without its Begin
		return
	}
	c.busy--
	if c.busy == 0 && !c.closed && c.elem == nil {
		c.elem = c.l.peers[c.ip].idle.PushBack(c)
	}
}

type connKey struct{}

// withConn returns ctx carrying c.
func withConn(ctx context.Context, c *Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// connFrom is the *Conn in ctx, or nil.
func connFrom(ctx context.Context) *Conn {
	c, _ := ctx.Value(connKey{}).(*Conn)
	return c
}

// Metrics counts the listeners' connections. A nil *Metrics counts nothing.
type Metrics struct {
	conns, caps        *prometheus.GaugeVec
	refusedC, evictedC *prometheus.CounterVec
}

// NewMetrics registers the listener metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ragwatch_listener_connections",
			Help: "Connections open on a listener.",
		}, []string{"listener"}),
		caps: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ragwatch_listener_max_connections",
			Help: "Connection cap of a listener, derived from the memory and file-descriptor limits.",
		}, []string{"listener"}),
		refusedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_listener_connections_refused_total",
			Help: "Connections closed on arrival because the listener was at its cap with every connection serving a request.",
		}, []string{"listener"}),
		evictedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_listener_connections_evicted_total",
			Help: "Connections without a request in flight (idle, or still sending headers) closed to make room for a new one at the cap.",
		}, []string{"listener"}),
	}
	if reg != nil {
		reg.MustRegister(m.conns, m.caps, m.refusedC, m.evictedC)
	}
	return m
}

func (m *Metrics) init(name string, limit int) {
	if m == nil {
		return
	}
	m.caps.WithLabelValues(name).Set(float64(limit))
	m.conns.WithLabelValues(name).Set(0)
	m.refusedC.WithLabelValues(name)
	m.evictedC.WithLabelValues(name)
}

func (m *Metrics) set(name string, open int) {
	if m != nil {
		m.conns.WithLabelValues(name).Set(float64(open))
	}
}

func (m *Metrics) refused(name string) {
	if m != nil {
		m.refusedC.WithLabelValues(name).Inc()
	}
}

func (m *Metrics) evicted(name string) {
	if m != nil {
		m.evictedC.WithLabelValues(name).Inc()
	}
}
