// Command slowjudge is an LLM judge that is too slow or dead, for measuring what a bad judge
// does to ingest (docs/performance.md): every request to any path waits -delay, then gets a
// 503; with -delay 0 it is never answered (held until the client gives up). It prints how many
// requests it received every 10 seconds.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	delay := flag.Duration("delay", 5*time.Second, "wait before answering 503; 0 never answers")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var received atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		if *delay <= 0 {
			select {
			case <-r.Context().Done():
			case <-ctx.Done():
			}
			return
		}
		select {
		case <-time.After(*delay):
			http.Error(w, `{"error":{"message":"judge overloaded"}}`, http.StatusServiceUnavailable)
		case <-r.Context().Done():
		case <-ctx.Done():
		}
	})
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("slowjudge listening on http://%s/v1 (delay %s)\n", lis.Addr(), *delay)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Printf("slowjudge: %d requests received\n", received.Load())
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
	}()
	if err := srv.Serve(lis); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
	fmt.Printf("slowjudge: %d requests received\n", received.Load())
}
