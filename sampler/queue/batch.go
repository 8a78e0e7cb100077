package queue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// A batch is several queued records in one message of the scoring stream: batchMagic, then
// each record as its length (four bytes, big-endian) and the record in either of its forms
// (binary or JSON, as a message of its own would carry it). The publisher batches records of
// the binary encoding (scoring.queue.batch_records); a worker scores a batch's records one
// after the other and settles the message once. Every message costs the server a store, a delivery, an
// ack and a removal, and the publisher and the worker a round trip each, whatever its size:
// those were most of a sampled record's queueing CPU (docs/performance.md).
//
// Retries keep their per-record meaning. A worker that could not score some records of a
// batch (a judge timing out on them) publishes those records again as a batch of their own,
// with headers saying how many attempts they have had (HeaderAttempts) and when the next
// may start (HeaderRetryAt), and acks the batch: the records scored are not scored again.

// batchMagic starts a batch: a NUL, which no JSON text starts with, "rwb" and the version.
const batchMagic = "\x00rwb\x01"

// Headers of a batch published again for the records that still need scoring.
const (
	// HeaderAttempts is how many attempts the batch's records have had (at least 1).
	HeaderAttempts = "Ragwatch-Attempts"
	// HeaderRetryAt is when the next attempt may start, Unix milliseconds (rounded up).
	HeaderRetryAt = "Ragwatch-Retry-At"
)

// IsBatch reports whether data is a batch.
func IsBatch(data []byte) bool { return bytes.HasPrefix(data, []byte(batchMagic)) }

// appendBatchEntry appends one encoded record (either form) to a batch.
func appendBatchEntry(b, rec []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(rec)))
	return append(b, rec...)
}

// entryLen is the room of an entry's length.
const entryLen = 4

// SplitBatch returns the records of a batch, each in the form a message of its own would
// carry (DecodeRecord reads it), as subslices of data. It fails on a batch cut short or
// without records.
func SplitBatch(data []byte) ([][]byte, error) {
	if !IsBatch(data) {
		return nil, errors.New("not a batch")
	}
	rest := data[len(batchMagic):]
	var out [][]byte
	for len(rest) > 0 {
		if len(rest) < entryLen {
			return nil, fmt.Errorf("batch entry %d: %d bytes left, too few for a length", len(out), len(rest))
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[entryLen:]
		if n > uint32(len(rest)) {
			return nil, fmt.Errorf("batch entry %d: %d bytes, %d left", len(out), n, len(rest))
		}
		out = append(out, rest[:n:n])
		rest = rest[n:]
	}
	if len(out) == 0 {
		return nil, errors.New("empty batch")
	}
	return out, nil
}

// Batch returns a batch of entries, each a queued record in either form (SplitBatch's
// inverse).
func Batch(entries [][]byte) []byte {
	n := len(batchMagic)
	for _, e := range entries {
		n += entryLen + len(e)
	}
	b := append(make([]byte, 0, n), batchMagic...)
	for _, e := range entries {
		b = appendBatchEntry(b, e)
	}
	return b
}

// Retry is what the headers of a batch published again say (HeaderAttempts, HeaderRetryAt).
type Retry struct {
	Attempts int
	At       time.Time
}

// RetryOf reads a message's retry headers; ok is false when it has none. Headers that do not
// parse are taken as none: the records are then scored with the attempts of a first delivery.
func RetryOf(h nats.Header) (r Retry, ok bool) {
	a, err := strconv.Atoi(h.Get(HeaderAttempts))
	if err != nil || a < 1 {
		return Retry{}, false
	}
	ms, err := strconv.ParseInt(h.Get(HeaderRetryAt), 10, 64)
	if err != nil {
		return Retry{}, false
	}
	return Retry{Attempts: a, At: time.UnixMilli(ms)}, true
}

// NewRetryMsg returns a batch of entries (records as SplitBatch gives them) to publish on
// subject again, after attempts attempts, for a next attempt at or after at. id is its
// Nats-Msg-Id: the same for the same batch published again, so that a worker's repeated
// publish is stored once.
func NewRetryMsg(subject, id string, entries [][]byte, attempts int, at time.Time) *nats.Msg {
	msg := nats.NewMsg(subject)
	msg.Data = Batch(entries)
	msg.Header.Set(HeaderAttempts, strconv.Itoa(attempts))
	ms := at.UnixMilli()
	if time.UnixMilli(ms).Before(at) {
		ms++ // rounded up: the next attempt never starts before at
	}
	msg.Header.Set(HeaderRetryAt, strconv.FormatInt(ms, 10))
	msg.Header.Set(nats.MsgIdHdr, id)
	return msg
}
