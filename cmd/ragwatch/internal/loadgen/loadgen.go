// Package loadgen sends synthetic RAG traces to an OTLP endpoint (gRPC or HTTP) or to NATS at a
// target rate or as fast as possible, and reports the achieved rate, errors and latency.
package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/synth"
)

// Options configure a run.
type Options struct {
	Protocol    string  // grpc | http (OTLP/HTTP protobuf) | http-json (OTLP/HTTP JSON) | nats
	Endpoint    string  // host:port for grpc, URL or host:port for http, NATS URL for nats
	Subject     string  // NATS subject for OTLP protobuf (default ragwatch.otlp.traces)
	Rate        float64 // traces per second; 0 = as fast as possible
	Duration    time.Duration
	Count       int // stop after this many traces (0 = until Duration)
	Batch       int // traces per request (default 1)
	Concurrency int // requests in flight (default 4)
	Synth       synth.Options
}

// Result is what a run achieved.
type Result struct {
	// Traces counts the traces of requests that got an answer, accepted or refused (Errors).
	Traces int64
	// Cut counts the traces of requests still in flight when the run's duration ended: the
	// endpoint may or may not have taken them, so they are in neither Traces nor Errors.
	Cut      int64
	Requests int64
	Errors   int64
	Elapsed  time.Duration
	// Latency percentiles of requests.
	P50, P90, P99, Max time.Duration
	FirstError         string
}

// Rate is the achieved traces per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Traces) / r.Elapsed.Seconds()
}

func (r Result) String() string {
	s := fmt.Sprintf("traces=%d requests=%d errors=%d elapsed=%s rate=%.0f/s latency p50=%s p90=%s p99=%s max=%s",
		r.Traces, r.Requests, r.Errors, r.Elapsed.Round(time.Millisecond), r.Rate(),
		r.P50.Round(time.Microsecond), r.P90.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond))
	if r.Cut > 0 {
		s += fmt.Sprintf(" cut=%d (traces in flight when the duration ended; taken or not)", r.Cut)
	}
	if r.FirstError != "" {
		s += "\nfirst error: " + r.FirstError
	}
	return s
}

type sender func(ctx context.Context, req ptraceotlp.ExportRequest) error

// Run sends traffic until ctx ends, Duration passes or Count traces were sent.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Batch <= 0 {
		o.Batch = 1
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Duration <= 0 && o.Count <= 0 {
		return Result{}, errors.New("set a duration or a count")
	}
	send, closeFn, err := newSender(o)
	if err != nil {
		return Result{}, err
	}
	defer closeFn()
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	var lim *rate.Limiter
	if o.Rate > 0 {
		burst := o.Batch
		if burst < 1 {
			burst = 1
		}
		lim = rate.NewLimiter(rate.Limit(o.Rate), burst)
	}
	gen := synth.New(o.Synth)
	var (
		sent, cut, reqs, errs atomic.Int64
		mu                    sync.Mutex
		lat                   []time.Duration
		firstErr              string
		wg                    sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			defer func() { mu.Lock(); lat = append(lat, local...); mu.Unlock() }()
			for ctx.Err() == nil {
				n := o.Batch
				if o.Count > 0 {
					left := int64(o.Count) - sent.Add(int64(n))
					if left < 0 {
						n += int(left)
						if n <= 0 {
							return
						}
					}
				}
				if lim != nil {
					if err := lim.WaitN(ctx, n); err != nil {
						return
					}
				}
				td := ptrace.NewTraces()
				now := time.Now()
				for i := 0; i < n; i++ {
					turn := gen.Next(now)
					synth.AppendTraces(td, &turn)
				}
				t0 := time.Now()
				err := send(ctx, ptraceotlp.NewExportRequestFromTraces(td))
				local = append(local, time.Since(t0))
				reqs.Add(1)
				if err != nil && (ctx.Err() != nil || cutByEnd(ctx, err)) {
					// Cut by the end of the run: the endpoint may have taken it or not.
					cut.Add(int64(n))
					if o.Count > 0 {
						sent.Add(-int64(n)) // reserved above
					}
					continue
				}
				if o.Count == 0 {
					sent.Add(int64(n))
				}
				if err != nil {
					errs.Add(1)
					mu.Lock()
					if firstErr == "" {
						firstErr = err.Error()
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	res := Result{Traces: sent.Load(), Cut: cut.Load(), Requests: reqs.Load(), Errors: errs.Load(), Elapsed: time.Since(start), FirstError: firstErr}
	if o.Count > 0 && res.Traces > int64(o.Count) {
		res.Traces = int64(o.Count)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
		res.P50, res.P90, res.P99, res.Max = pct(0.5), pct(0.9), pct(0.99), lat[len(lat)-1]
	}
	return res, nil
}

// cutByEnd reports whether err is a request cut by the end of the run: gRPC fails it with
// DeadlineExceeded (its own timer, or the server's from the grpc-timeout header) a moment before
// ctx.Err() turns non-nil. That is not an error of the endpoint.
func cutByEnd(ctx context.Context, err error) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return false
	}
	left := time.Until(dl)
	return left <= 0 || (status.Code(err) == codes.DeadlineExceeded && left < time.Second)
}

func newSender(o Options) (sender, func(), error) {
	switch o.Protocol {
	case "grpc", "":
		conn, err := grpc.NewClient(o.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, fmt.Errorf("dial %s: %w", o.Endpoint, err)
		}
		c := ptraceotlp.NewGRPCClient(conn)
		return func(ctx context.Context, req ptraceotlp.ExportRequest) error {
			_, err := c.Export(ctx, req)
			return err
		}, func() { _ = conn.Close() }, nil
	case "http", "http-json":
		asJSON := o.Protocol == "http-json"
		url := o.Endpoint
		if !bytes.HasPrefix([]byte(url), []byte("http")) {
			url = "http://" + url
		}
		if !bytes.HasSuffix([]byte(url), []byte("/v1/traces")) {
			url += "/v1/traces"
		}
		client := &http.Client{Timeout: 10 * time.Second}
		return func(ctx context.Context, req ptraceotlp.ExportRequest) error {
			body, ctype, err := []byte(nil), "application/x-protobuf", error(nil)
			if asJSON {
				body, err = req.MarshalJSON()
				ctype = "application/json"
			} else {
				body, err = req.MarshalProto()
			}
			if err != nil {
				return err
			}
			hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			hr.Header.Set("Content-Type", ctype)
			resp, err := client.Do(hr)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("HTTP %d: %q", resp.StatusCode, msg)
			}
			return nil
		}, func() { client.CloseIdleConnections() }, nil
	case "nats":
		nc, err := nats.Connect(o.Endpoint)
		if err != nil {
			// The URL may carry the app user's password (the embedded server requires one).
			return nil, nil, fmt.Errorf("connect NATS %s: %w", config.SecretURL(o.Endpoint), err)
		}
		subject := o.Subject
		if subject == "" {
			subject = "ragwatch.otlp.traces"
		}
		return func(ctx context.Context, req ptraceotlp.ExportRequest) error {
			body, err := req.MarshalProto()
			if err != nil {
				return err
			}
			return nc.Publish(subject, body)
		}, func() { _ = nc.Drain() }, nil
	}
	return nil, nil, fmt.Errorf("unknown protocol %q (want grpc, http, http-json or nats)", o.Protocol)
}
