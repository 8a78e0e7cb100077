package testutil

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer that a running server may write to (its logs) while the test reads
// it. The zero value is ready to use. mu guards b.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// FreeAddr returns a loopback address ("127.0.0.1:port") nobody listens on now, for a server
// the test configures but does not start itself. Another process may take the port before the
// server does; where the code under test accepts port 0, prefer that.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}
