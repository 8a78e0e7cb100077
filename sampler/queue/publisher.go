package queue

import (
	"bytes"
	"context"
	"encoding/json"
	jsonv2 "encoding/json/v2"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/natsconn"
	"github.com/ragwatch/ragwatch/internal/record"
)

// Errors of Offer. The caller needs to do nothing: the drop is already counted.
var (
	ErrQueueFull   = errors.New("scoring queue full")
	ErrUnavailable = errors.New("NATS unavailable")
	ErrClosed      = errors.New("scoring publisher closed")
)

// ackTimeout bounds the wait for one publish acknowledgement before the record counts as
// dropped (nats_unavailable).
const ackTimeout = 5 * time.Second

// maxInFlight bounds publishes awaiting their acknowledgement.
const maxInFlight = 512

// Publisher moves sampled records from ingestion to the scoring stream without ever making
// ingestion wait: Offer puts the record in a bounded buffer or drops it (counted); one goroutine
// publishes asynchronously with the record key as Nats-Msg-Id, so a record is queued once
// within the dedup window however often it is offered.
type Publisher struct {
	js      jetstream.JetStream
	nc      *nats.Conn
	cfg     config.ScoringQueue
	m       *Metrics
	logger  *slog.Logger
	buf     chan item
	pending chan pendingPub

	// DepthInterval is how often the depth gauge is polled; set before Start.
	DepthInterval time.Duration

	storageFull  atomic.Bool  // the last acknowledged publish was refused for lack of storage
	lastFullWarn atomic.Int64 // when the storage-full warning was last logged, Unix nanoseconds

	mu      sync.RWMutex // guards closed against Offer's send on buf
	closed  bool
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type pendingPub struct {
	fut jetstream.PubAckFuture
	buf *bytes.Buffer // the message's data, back to encBufs once the future settled
}

// encBufs recycles the buffers records and score results are encoded into. A record's buffer
// is in use from its encoding until the publish's acknowledgement or error: until then the
// JetStream client keeps the message to send it again (after "no responders"), so it must not
// be rewritten. A scores message's goes back when core NATS's Publish has copied it.
var encBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuf bounds the buffers kept for reuse (records are about 6 KB): a buffer grown by a
// rare large record is not kept, so that the maxInFlight messages awaiting their ack never
// hold more than 64 KiB each for small records.
const maxPooledBuf = 64 << 10

// encodeOptions are encoding/json's (v1) own: encode writes the bytes json.Marshal returns.
var encodeOptions = json.DefaultOptionsV1()

// encode writes v's JSON, byte for byte what json.Marshal(v) returns, into a buffer from
// encBufs, which the caller returns with releaseBuf. It saves json.Marshal's copy of the
// output into a new slice of the record's size for every record.
func encode(v any) (*bytes.Buffer, error) {
	buf := encBufs.Get().(*bytes.Buffer)
	buf.Reset()
	if err := jsonv2.MarshalWrite(buf, v, encodeOptions); err != nil {
		releaseBuf(buf)
		return nil, err
	}
	return buf, nil
}

// encodeRecord writes r in the queue's encoding (scoring.queue.encoding) into a buffer from
// encBufs: the binary form (wire.go), or JSON when the encoding is "json" or r needs JSON to
// come out of the queue as it went in.
func encodeRecord(r *record.Record, encoding string) (*bytes.Buffer, error) {
	if encoding == EncodingJSON {
		return encode(r)
	}
	buf := encBufs.Get().(*bytes.Buffer)
	buf.Reset()
	buf.Grow(recordSize(r))
	b, err := appendRecord(buf.AvailableBuffer(), r)
	if err != nil {
		releaseBuf(buf)
		return encode(r) // JSON, or the error JSON gives
	}
	buf.Write(b) // b is buf's own room unless it outgrew it: a copy in place, or one copy
	return buf, nil
}

func releaseBuf(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBuf {
		encBufs.Put(buf)
	}
}

// NewPublisher returns a publisher to cfg.Subject with an in-memory buffer of buffer records
// (sampling.buffer). Call Setup first so the stream exists.
func NewPublisher(js jetstream.JetStream, cfg config.ScoringQueue, buffer int, reg prometheus.Registerer, logger *slog.Logger) *Publisher {
	if logger == nil {
		logger = slog.Default()
	}
	if buffer <= 0 {
		buffer = 1
	}
	return &Publisher{
		js: js, nc: js.Conn(), cfg: cfg, m: NewMetrics(reg), logger: logger,
		buf:           make(chan item, buffer),
		pending:       make(chan pendingPub, maxInFlight),
		DepthInterval: 5 * time.Second,
	}
}

// Start starts the publishing goroutines; it returns at once.
func (p *Publisher) Start(_ context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return nil
	}
	p.started = true
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(3)
	go func() { defer p.wg.Done(); p.publishLoop() }()
	go func() { defer p.wg.Done(); p.ackLoop() }()
	go func() { defer p.wg.Done(); PollDepth(ctx, p.js, p.cfg.Stream, p.DepthInterval, p.m) }()
	return nil
}

// Offer queues r (already marked with its Sampling) for publishing. It never blocks: when the
// buffer is full or NATS is not connected the record is dropped and counted. r must not be
// changed afterwards.
func (p *Publisher) Offer(r *record.Record) error { return p.offer(item{rec: r}) }

// item is one message to publish: a sampled record, or a pair job (OfferPair).
type item struct {
	rec  *record.Record
	pair *PairJob
}

func (p *Publisher) offer(it item) error {
	if !p.nc.IsConnected() {
		p.m.Dropped.WithLabelValues(DropNATSUnavailable).Inc()
		return ErrUnavailable
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.m.Dropped.WithLabelValues(DropNATSUnavailable).Inc()
		return ErrClosed
	}
	select {
	case p.buf <- it:
		return nil
	default:
		p.m.Dropped.WithLabelValues(DropQueueFull).Inc()
		return ErrQueueFull
	}
}

func (p *Publisher) publishLoop() {
	defer close(p.pending)
	for it := range p.buf {
		p.publish(it)
	}
}

func (p *Publisher) publish(it item) {
	if !p.nc.IsConnected() {
		p.m.Dropped.WithLabelValues(DropNATSUnavailable).Inc()
		return
	}
	var (
		buf *bytes.Buffer
		key string
		err error
	)
	if it.pair != nil {
		key = it.pair.Key()
		buf, err = encode(it.pair)
	} else {
		key = it.rec.Key()
		buf, err = encodeRecord(it.rec, p.cfg.Encoding)
	}
	if err != nil {
		// Records are validated at intake; this is a bug, not input.
		p.logger.Error("encode sampled record", "err", err)
		p.m.Dropped.WithLabelValues(DropTooLarge).Inc()
		return
	}
	msg := &nats.Msg{Subject: p.cfg.Subject, Data: buf.Bytes(), Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, key)
	if it.pair != nil {
		msg.Header.Set(HeaderKind, KindPair)
	}
	fut, err := p.js.PublishMsgAsync(msg)
	if err != nil {
		p.drop(err) // buf is not reused: the client may still hold msg
		return
	}
	p.pending <- pendingPub{fut: fut, buf: buf}
}

func (p *Publisher) ackLoop() {
	timer := time.NewTimer(ackTimeout)
	defer timer.Stop()
	for pp := range p.pending {
		timer.Reset(ackTimeout)
		select {
		case <-pp.fut.Ok():
			p.setStorageFull(false)
			releaseBuf(pp.buf)
		case err := <-pp.fut.Err():
			p.drop(err)
			releaseBuf(pp.buf)
		case <-timer.C:
			// The client may still send the message again: its buffer is left to the GC.
			p.drop(jetstream.ErrAsyncPublishTimeout)
		}
	}
}

// StorageFull reports whether JetStream refused the last acknowledged publish for lack of
// storage: sampling goes on, and every sample is counted as dropped (storage_full) until the
// stream has room again. /readyz reports it.
func (p *Publisher) StorageFull() bool { return p.storageFull.Load() }

// storageFullWarnEvery bounds the storage-full warning. Under a sustained overload the stream
// is full and has room again each time a worker takes a record, so the state changes with
// every record scored; the gauge follows it, the log does not.
const storageFullWarnEvery = time.Minute

func (p *Publisher) setStorageFull(full bool) {
	if p.storageFull.Swap(full) != full {
		p.m.StorageFull.Set(0)
		if full {
			p.m.StorageFull.Set(1)
			now := time.Now().UnixNano()
			if last := p.lastFullWarn.Load(); (last == 0 || now-last >= int64(storageFullWarnEvery)) && p.lastFullWarn.CompareAndSwap(last, now) {
				p.logger.Warn("JetStream storage full: sampled records are dropped (storage_full) until the scoring stream has room (logged at most once a minute; ragwatch_scoring_queue_storage_full follows it)",
					"stream", p.cfg.Stream, "max_bytes", p.cfg.MaxBytes)
			}
		}
	}
}

// drop counts a failed publish by its cause.
func (p *Publisher) drop(err error) {
	reason := DropNATSUnavailable
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		reason = DropTooLarge
	case natsconn.IsStorageFull(err):
		// "maximum bytes exceeded" (the stream at max_bytes, discard new), "insufficient
		// resources" (the server's max_store): the disk budget is used up.
		reason = DropStorageFull
		p.setStorageFull(true)
	case errors.As(err, &apiErr) && strings.Contains(apiErr.Description, "maximum"):
		// "maximum messages exceeded": the stream is full.
		reason = DropQueueFull
	}
	p.m.Dropped.WithLabelValues(reason).Inc()
	p.logger.Debug("sampled record dropped", "reason", reason, "err", err)
}

// Shutdown stops taking records, publishes what is buffered and waits for the
// acknowledgements until ctx ends. It is idempotent and safe without Start.
func (p *Publisher) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.buf)
		if !p.started {
			close(p.pending)
		}
	}
	p.mu.Unlock()
	if p.cancel != nil {
		p.cancel() // the depth poller
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
