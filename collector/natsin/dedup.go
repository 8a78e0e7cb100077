package natsin

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// dedup remembers what was consumed within a window, bounded in count. In JetStream mode the
// marks are also written to a KV bucket (whose TTL is the window), and a redelivered message
// is checked against it, so a restart still recognises what the previous run consumed but
// could not ack.
type dedup struct {
	window time.Duration
	max    int
	kv     jetstream.KeyValue // nil: memory only
	now    func() time.Time

	mu    sync.Mutex // guards seen and order
	seen  map[string]*list.Element
	order *list.List // of mark, oldest first
}

type mark struct {
	key string
	at  time.Time
}

func newDedup(window time.Duration, maxEntries int, kv jetstream.KeyValue, now func() time.Time) *dedup {
	return &dedup{window: window, max: maxEntries, kv: kv, now: now, seen: map[string]*list.Element{}, order: list.New()}
}

// seenBefore reports whether key was marked within the window. The KV bucket is read only for
// redelivered messages (checkKV): a first delivery cannot have been consumed by an earlier run.
func (d *dedup) seenBefore(ctx context.Context, key string, checkKV bool) (bool, error) {
	now := d.now()
	d.mu.Lock()
	d.expireLocked(now)
	_, ok := d.seen[key]
	d.mu.Unlock()
	if ok || !checkKV || d.kv == nil {
		return ok, nil
	}
	e, err := d.kv.Get(ctx, kvKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	at, perr := strconv.ParseInt(string(e.Value()), 10, 64)
	if perr == nil && now.Sub(time.Unix(0, at)) > d.window {
		return false, nil
	}
	d.remember(key, now)
	return true, nil
}

// mark records key as consumed, in memory and in the KV bucket.
func (d *dedup) mark(ctx context.Context, key string) error {
	now := d.now()
	d.remember(key, now)
	if d.kv == nil {
		return nil
	}
	_, err := d.kv.Put(ctx, kvKey(key), []byte(strconv.FormatInt(now.UnixNano(), 10)))
	return err
}

func (d *dedup) remember(key string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if el, ok := d.seen[key]; ok {
		el.Value = mark{key: key, at: now}
		d.order.MoveToBack(el)
		return
	}
	d.seen[key] = d.order.PushBack(mark{key: key, at: now})
	for d.order.Len() > d.max {
		d.dropLocked(d.order.Front())
	}
	d.expireLocked(now)
}

func (d *dedup) expireLocked(now time.Time) {
	for el := d.order.Front(); el != nil; el = d.order.Front() {
		if now.Sub(el.Value.(mark).at) < d.window {
			return
		}
		d.dropLocked(el)
	}
}

func (d *dedup) dropLocked(el *list.Element) {
	delete(d.seen, el.Value.(mark).key)
	d.order.Remove(el)
}

func (d *dedup) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.order.Len()
}

// kvKey maps a dedup key to a valid KV key: safe ones are kept, others hashed.
func kvKey(key string) string {
	if len(key) <= 128 {
		ok := key != ""
		for i := 0; i < len(key) && ok; i++ {
			c := key[i]
			ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_'
		}
		if ok {
			return key
		}
	}
	sum := sha256.Sum256([]byte(key))
	return "h_" + base64.RawURLEncoding.EncodeToString(sum[:])
}
