// Package loadgen sends synthetic RAG traces to an OTLP endpoint (gRPC or HTTP) or to NATS at a
// target rate or as fast as possible, and reports the achieved rate, errors and latency. With
// Logs it also sends, for every trace, the GenAI log events an OpenAI-instrumented app emits
// for it (synth.AppendLogs), over the same transport.
package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
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
	LogsSubject string  // NATS subject for OTLP protobuf logs (default ragwatch.otlp.logs)
	Rate        float64 // traces per second; 0 = as fast as possible
	Duration    time.Duration
	Count       int // stop after this many traces (0 = until Duration)
	Batch       int // traces per request (default 1)
	Concurrency int // requests in flight (default 4)
	// Logs sends, before each request of traces, one request of the GenAI log events of the
	// same traces (synth.AppendLogs: a system message, a user message and a choice of each
	// trace's LLM span), as an instrumented app's log exporter does; both requests count in
	// Requests and in the latency percentiles.
	Logs  bool
	Synth synth.Options
}

// Result is what a run achieved.
type Result struct {
	// Traces counts the traces of requests that got an answer, accepted or refused (Errors).
	Traces int64
	// Cut counts the traces of requests still in flight when the run's duration ended: the
	// endpoint may or may not have taken them, so they are in neither Traces nor Errors.
	Cut int64
	// LogRecords counts the log records (Options.Logs) of requests that got an answer.
	LogRecords int64
	Requests   int64
	Errors     int64
	Elapsed    time.Duration
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
	if r.LogRecords > 0 {
		s += fmt.Sprintf(" log_records=%d", r.LogRecords)
	}
	if r.Cut > 0 {
		s += fmt.Sprintf(" cut=%d (traces in flight when the duration ended; taken or not)", r.Cut)
	}
	if r.FirstError != "" {
		s += "\nfirst error: " + r.FirstError
	}
	return s
}

// request is an OTLP export request of traces or of logs (ptraceotlp / plogotlp).
type request interface {
	MarshalProto() ([]byte, error)
	MarshalJSON() ([]byte, error)
}

type sender func(ctx context.Context, req request) error

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
		logRecords            atomic.Int64
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
				var ld plog.Logs
				records := 0
				if o.Logs {
					ld = plog.NewLogs()
				}
				now := time.Now()
				for i := 0; i < n; i++ {
					turn := gen.Next(now)
					synth.AppendTraces(td, &turn)
					if o.Logs {
						records += synth.AppendLogs(ld, &turn)
					}
				}
				var err error
				if o.Logs {
					// The events first, as they usually arrive: a log exporter's batch goes
					// out before the span exporter's that holds the trace's root.
					t0 := time.Now()
					err = send(ctx, plogotlp.NewExportRequestFromLogs(ld))
					local = append(local, time.Since(t0))
					reqs.Add(1)
					if err == nil {
						logRecords.Add(int64(records))
					}
				}
				if err == nil {
					t0 := time.Now()
					err = send(ctx, ptraceotlp.NewExportRequestFromTraces(td))
					local = append(local, time.Since(t0))
					reqs.Add(1)
				}
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
	res := Result{Traces: sent.Load(), Cut: cut.Load(), LogRecords: logRecords.Load(), Requests: reqs.Load(), Errors: errs.Load(), Elapsed: time.Since(start), FirstError: firstErr}
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

// newSender returns the function that sends an export request of traces or of logs to
// o.Endpoint over o.Protocol, each to its own service, path or subject.
func newSender(o Options) (sender, func(), error) {
	switch o.Protocol {
	case "grpc", "":
		conn, err := grpc.NewClient(o.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, fmt.Errorf("dial %s: %w", o.Endpoint, err)
		}
		traces, logs := ptraceotlp.NewGRPCClient(conn), plogotlp.NewGRPCClient(conn)
		return func(ctx context.Context, req request) error {
			var err error
			switch r := req.(type) {
			case ptraceotlp.ExportRequest:
				_, err = traces.Export(ctx, r)
			case plogotlp.ExportRequest:
				_, err = logs.Export(ctx, r)
			default:
				err = fmt.Errorf("no gRPC service for %T", req)
			}
			return err
		}, func() { _ = conn.Close() }, nil
	case "http", "http-json":
		asJSON := o.Protocol == "http-json"
		base := strings.TrimSuffix(o.Endpoint, "/v1/traces")
		if !strings.HasPrefix(base, "http") {
			base = "http://" + base
		}
		client := &http.Client{Timeout: 10 * time.Second}
		return func(ctx context.Context, req request) error {
			url := base + "/v1/traces"
			if _, ok := req.(plogotlp.ExportRequest); ok {
				url = base + "/v1/logs"
			}
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
		subject, logsSubject := o.Subject, o.LogsSubject
		if subject == "" {
			subject = "ragwatch.otlp.traces"
		}
		if logsSubject == "" {
			logsSubject = "ragwatch.otlp.logs"
		}
		return func(ctx context.Context, req request) error {
			body, err := req.MarshalProto()
			if err != nil {
				return err
			}
			if _, ok := req.(plogotlp.ExportRequest); ok {
				return nc.Publish(logsSubject, body)
			}
			return nc.Publish(subject, body)
		}, func() { _ = nc.Drain() }, nil
	}
	return nil, nil, fmt.Errorf("unknown protocol %q (want grpc, http, http-json or nats)", o.Protocol)
}
