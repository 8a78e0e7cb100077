package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	jsonv2 "encoding/json/v2"
	"errors"
	"log/slog"
	"strconv"
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

// ackTimeout bounds the wait for one publish acknowledgement, from its publish, before the
// record counts as dropped (nats_unavailable).
const ackTimeout = 5 * time.Second

// failingAckGrace is how long an acknowledgement is still awaited once the store reports the
// stream failing writes: those of messages stored before the failure may still be on their
// way; the others will not come.
const failingAckGrace = 200 * time.Millisecond

// maxInFlight bounds publishes awaiting their acknowledgement.
const maxInFlight = 512

// Publisher moves sampled records from ingestion to the scoring stream without ever making
// ingestion wait: Offer puts the record in a bounded buffer or drops it (counted); one goroutine
// publishes asynchronously. A record alone in its message has its key as Nats-Msg-Id, so it is
// queued once within the dedup window however often it is offered; records that are buffered
// together, or arrive within scoring.queue.batch_wait of the first, go as one batch
// (batch.go) of up to scoring.queue.batch_records.
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
	// Health is the embedded server's store health (nil for an external cluster); set before
	// Start. While it reports the scoring stream failing writes, records are dropped at once
	// as storage_full rather than published into a store that does not answer.
	Health *natsconn.StoreHealth

	lingerTimer *time.Timer // fill's wait for a batch's records; publishLoop's own

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
	// buf is the message's data, back to encBufs once the future settled; nil for a batch,
	// whose array is its own.
	buf     *bytes.Buffer
	records int // records in the message: a batch's, or 1
	sent    time.Time
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
	if buf != nil && buf.Cap() <= maxPooledBuf {
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
	batchMax := p.cfg.BatchRecords
	if p.cfg.Encoding == EncodingJSON {
		batchMax = 1 // batches are of the binary encoding: JSON is for workers older than both
	}
	var batch []*record.Record
	for it := range p.buf {
		if it.pair != nil || batchMax <= 1 {
			p.publish(it)
			continue
		}
		batch = p.fill(append(batch[:0], it.rec), batchMax)
		for rest := batch; len(rest) > 0; {
			if len(rest) == 1 {
				p.publish(item{rec: rest[0]}) // a batch of one is a record's own message
				break
			}
			rest = p.publishBatch(rest)
		}
		clear(batch) // the records are not kept past their publish
	}
}

// fill adds to batch the records already buffered and those arriving within BatchWait of
// the first, up to batchMax; pair jobs arriving meanwhile are published at once.
func (p *Publisher) fill(batch []*record.Record, batchMax int) []*record.Record {
	var wait <-chan time.Time
	if p.cfg.BatchWait > 0 {
		if p.lingerTimer == nil {
			p.lingerTimer = time.NewTimer(p.cfg.BatchWait)
		} else {
			p.lingerTimer.Reset(p.cfg.BatchWait) // a stopped or fired timer: Go 1.23's semantics
		}
		defer p.lingerTimer.Stop()
		wait = p.lingerTimer.C
	}
	for len(batch) < batchMax {
		var (
			it item
			ok bool
		)
		select {
		case it, ok = <-p.buf:
		default:
			if wait == nil {
				return batch
			}
			select {
			case it, ok = <-p.buf:
			case <-wait:
				return batch
			}
		}
		if !ok {
			return batch // closed: Shutdown publishes what was taken
		}
		if it.pair != nil {
			p.publish(it)
			continue
		}
		batch = append(batch, it.rec)
	}
	return batch
}

// maxBatchBytes bounds a batch below the server's max payload (headers take the rest).
func (p *Publisher) maxBatchBytes() int {
	limit := int64(1 << 20)
	if mp := p.nc.MaxPayload(); mp > 0 {
		limit = mp
	}
	return int(max(limit-4096, limit/2))
}

// publishBatch publishes the first records of recs that fit in one message as a batch and
// returns the others. A record the binary form cannot carry goes as its JSON; one neither can
// encode is dropped and counted, as publish does.
func (p *Publisher) publishBatch(recs []*record.Record) []*record.Record {
	limit := p.maxBatchBytes()
	// One array of the batch's size: grown by append it would be allocated and copied again at
	// every doubling. Not pooled: a batch is up to the max payload, and the buffers awaiting
	// their ack would keep that much each.
	size := len(batchMagic)
	for _, r := range recs {
		if size += entryLen + recordSize(r); size >= limit {
			size = limit
			break
		}
	}
	b := append(make([]byte, 0, size), batchMagic...)
	taken, in := 0, 0
	var first *record.Record
	for _, r := range recs {
		at := len(b)
		var err error
		if b, err = appendRecordEntry(b, r); err != nil {
			p.logger.Error("encode sampled record", "err", err)
			p.m.Dropped.WithLabelValues(DropTooLarge).Inc()
			taken++
			b = b[:at]
			continue
		}
		if len(b) > limit && in > 0 {
			b = b[:at] // publish what fits; this record starts the next message
			break
		}
		if first == nil {
			first = r
		}
		taken++
		in++
	}
	switch in {
	case 0:
		return recs[taken:]
	case 1:
		p.publish(item{rec: first})
		return recs[taken:]
	}
	msg := &nats.Msg{Subject: p.cfg.Subject, Data: b, Header: nats.Header{}}
	// The first record's key names the batch: the recent-records cache queues a record once, so
	// no other batch starts with it.
	msg.Header.Set(jetstream.MsgIDHeader, "batch:"+first.Key()+":"+strconv.Itoa(in))
	if !p.nc.IsConnected() {
		p.m.Dropped.WithLabelValues(DropNATSUnavailable).Add(float64(in))
		return recs[taken:]
	}
	if err := p.Health.Failing(p.cfg.Stream); err != nil {
		p.dropN(err, in)
		return recs[taken:]
	}
	fut, err := p.js.PublishMsgAsync(msg)
	if err != nil {
		p.dropN(err, in)
		return recs[taken:]
	}
	p.m.MessageRecords.Observe(float64(in))
	p.pending <- pendingPub{fut: fut, records: in, sent: time.Now()}
	return recs[taken:]
}

// appendRecordEntry appends r to a batch in the binary form, or as its JSON when the binary
// form cannot carry it (encodeRecord's choice).
func appendRecordEntry(b []byte, r *record.Record) ([]byte, error) {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	out, err := appendRecord(b, r)
	if err != nil {
		j, jerr := encode(r)
		if jerr != nil {
			return b[:at], jerr
		}
		out = append(b, j.Bytes()...)
		releaseBuf(j)
	}
	binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-entryLen))
	return out, nil
}

func (p *Publisher) publish(it item) {
	if !p.nc.IsConnected() {
		p.m.Dropped.WithLabelValues(DropNATSUnavailable).Inc()
		return
	}
	if err := p.Health.Failing(p.cfg.Stream); err != nil {
		p.drop(err)
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
	if it.pair == nil {
		p.m.MessageRecords.Observe(1)
	}
	p.pending <- pendingPub{fut: fut, buf: buf, records: 1, sent: time.Now()}
}

func (p *Publisher) ackLoop() {
	timer := time.NewTimer(ackTimeout)
	defer timer.Stop()
	var failSeen time.Time // when ackLoop first saw the stream failing writes; zero while it writes
	for pp := range p.pending {
		p.awaitAck(pp, timer, &failSeen)
	}
}

// awaitAck waits for pp's acknowledgement until ackTimeout after its publish: messages
// published together time out together, not one ackTimeout after the other. Once the store
// reports the stream failing writes (first seen at *failSeen), acknowledgements are awaited
// until failingAckGrace after that, and what did not come counts as storage_full.
func (p *Publisher) awaitAck(pp pendingPub, timer *time.Timer, failSeen *time.Time) {
	for {
		changed := p.Health.Changed()
		deadline := pp.sent.Add(ackTimeout)
		if p.Health.Failing(p.cfg.Stream) != nil {
			if failSeen.IsZero() {
				*failSeen = time.Now()
			}
			if soon := failSeen.Add(failingAckGrace); soon.Before(deadline) {
				deadline = soon
			}
		} else {
			*failSeen = time.Time{}
		}
		timer.Reset(time.Until(deadline))
		select {
		case <-pp.fut.Ok():
			p.setStorageFull(false)
			releaseBuf(pp.buf)
			return
		case err := <-pp.fut.Err():
			p.dropN(err, pp.records)
			releaseBuf(pp.buf)
			return
		case <-changed:
			continue
		case <-timer.C:
			// The client may still send the message again: its buffer is left to the GC.
			if err := p.Health.Failing(p.cfg.Stream); err != nil {
				p.dropN(err, pp.records)
			} else {
				p.dropN(jetstream.ErrAsyncPublishTimeout, pp.records)
			}
			return
		}
	}
}

// StorageFull reports whether JetStream refused the last acknowledged publish for lack of
// storage: sampling goes on, and every sample is counted as dropped (storage_full) until the
// stream has room again. /readyz reports it.
func (p *Publisher) StorageFull() bool { return p.storageFull.Load() }

// storageFullWarnEvery bounds the storage-full warning. Under a sustained overload the stream
// is full and has room again each time a worker takes a message, so the state changes with
// every message scored; the gauge follows it, the log does not.
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

// drop counts a failed publish of one record by its cause.
func (p *Publisher) drop(err error) { p.dropN(err, 1) }

// dropN counts a failed publish of n records by its cause.
func (p *Publisher) dropN(err error, n int) {
	reason := DropNATSUnavailable
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		reason = DropTooLarge
	case natsconn.IsStorageFull(err):
		// "maximum bytes exceeded" (the stream at max_bytes, discard new), "insufficient
		// resources" (the server's max_store): the disk budget is used up; or the store fails
		// writes (a full volume, no file descriptor left: natsconn.StoreHealth).
		reason = DropStorageFull
		p.setStorageFull(true)
	case errors.As(err, &apiErr) && strings.Contains(apiErr.Description, "maximum"):
		// "maximum messages exceeded": the stream is full.
		reason = DropQueueFull
	}
	p.m.Dropped.WithLabelValues(reason).Add(float64(n))
	p.logger.Debug("sampled records dropped", "records", n, "reason", reason, "err", err)
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
