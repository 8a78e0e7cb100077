// Command slowjudge is an OpenAI-compatible LLM judge for measuring what a judge does to ingest
// (docs/performance.md). In mode slow every request to any path waits -delay, then gets a 503;
// in mode dead it is never answered (held until the client gives up); in mode ok a chat
// completion is answered after -latency with a verdict that matches the JSON schema the
// request asked for, so ragwatch's openai judge produces scores. It prints how many requests
// it received and answered, and the connections opened, every 10 seconds.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// Modes of the judge.
const (
	ModeOK   = "ok"   // valid verdicts after -latency
	ModeSlow = "slow" // 503 after -delay
	ModeDead = "dead" // never answers
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	mode := flag.String("mode", "", "ok, slow or dead; empty is slow, or dead when -delay is 0")
	delay := flag.Duration("delay", 5*time.Second, "slow: wait before answering 503 (0 without -mode means dead)")
	latency := flag.Duration("latency", time.Second, "ok: wait before answering with a verdict")
	flag.Parse()
	if *mode == "" {
		*mode = ModeSlow
		if *delay <= 0 {
			*mode = ModeDead
		}
	}
	var wait time.Duration
	switch *mode {
	case ModeOK:
		wait = *latency
	case ModeSlow:
		wait = *delay
	case ModeDead:
	default:
		fmt.Fprintf(os.Stderr, "slowjudge: -mode must be ok, slow or dead, got %q\n", *mode)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	j := &judge{mode: *mode, wait: wait, stop: ctx.Done()}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("slowjudge listening on http://%s/v1 (mode %s, wait %s)\n", lis.Addr(), *mode, wait)
	srv := &http.Server{Handler: j, ReadHeaderTimeout: 10 * time.Second, ConnState: j.connState}
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Println(j.stats())
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
	fmt.Println(j.stats())
}

// judge is the HTTP handler of every mode.
type judge struct {
	mode string
	wait time.Duration
	stop <-chan struct{} // closed when the process stops: held requests end

	received, answered, conns atomic.Int64
}

func (j *judge) stats() string {
	return fmt.Sprintf("slowjudge: %d requests received, %d answered, %d connections opened",
		j.received.Load(), j.answered.Load(), j.conns.Load())
}

// connState counts connections: a client that does not keep its connections alive opens
// about one per request.
func (j *judge) connState(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		j.conns.Add(1)
	}
}

func (j *judge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	j.received.Add(1)
	// Read the request before waiting, as a server that queues it would. Until the body is
	// read net/http does not watch the connection, so a client that gives up would not end
	// r.Context() and a dead judge would hold the handler forever.
	body, err := readBody(r)
	if err != nil {
		http.Error(w, `{"error":{"message":"cannot read the request"}}`, http.StatusBadRequest)
		return
	}
	var elapsed <-chan time.Time
	if j.mode != ModeDead {
		t := time.NewTimer(j.wait)
		defer t.Stop()
		elapsed = t.C
	}
	select {
	case <-elapsed:
	case <-r.Context().Done():
		return
	case <-j.stop:
		return
	}
	if j.mode == ModeSlow {
		http.Error(w, `{"error":{"message":"judge overloaded"}}`, http.StatusServiceUnavailable)
		return
	}
	status, reply := answer(r.URL.Path, body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(reply)
	if status == http.StatusOK {
		j.answered.Add(1)
	}
}
