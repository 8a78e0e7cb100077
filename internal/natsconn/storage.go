package natsconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/promreg"
)

// JetStream error codes of a refused write for lack of space (nats-server errors.json).
const (
	codeInsufficientResources = 10023 // the server's store limit (max_store) is used up
	codeStorageExceeded       = 10047 // a new stream's cap does not fit the store
	codeStoreFailed           = 10077 // a stream at its max_bytes with discard new, or a failing disk
)

// ErrStoreWriteFailing is returned at once, without asking the server, for a write to a stream
// or bucket of the embedded server whose store failed a write (StoreHealth). IsStorageFull
// reports it: what is lost counts as storage_full.
var ErrStoreWriteFailing = errors.New("JetStream store cannot write")

// IsStorageFull reports whether err is JetStream refusing a write or a new stream for lack of
// storage: the server's max_store is used up, the stream or bucket reached its max_bytes, the
// disk is full, the process is out of file descriptors for the store, or the store is known to
// fail writes (ErrStoreWriteFailing). Callers count such refusals as storage_full rather than
// as an outage.
func IsStorageFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrStoreWriteFailing) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE) ||
		errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case codeInsufficientResources, codeStorageExceeded:
			return true
		case codeStoreFailed:
			return isSpaceText(apiErr.Description)
		}
		if apiErr.ErrorCode != 0 {
			return false
		}
		return isSpaceText(apiErr.Description)
	}
	return isSpaceText(err.Error())
}

func isSpaceText(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "maximum bytes exceeded") || strings.Contains(s, "insufficient resources") ||
		strings.Contains(s, "insufficient storage") || strings.Contains(s, "no space left") ||
		strings.Contains(s, "disk quota exceeded") || strings.Contains(s, "too many open files") ||
		strings.Contains(s, "critical write error")
}

// A failed write sticks in nats-server's file store (v2.15, server/filestore.go and stream.go):
// the first error of a block write (ENOSPC, EMFILE, ...) is kept in the filestore's and the
// stream's werr ("Critical write error"), and every later StoreMsg returns it at once without
// touching the disk. A standalone server does not even answer the publish: the client waits out
// its ack timeout. Nothing in the server clears werr when space or descriptors come back; only
// a new filestore does, that is the stream reloaded from its files. The lightest way to do that
// from outside the server package is to disable and re-enable JetStream for the stream's
// account (Account.DisableJetStream stops its streams without deleting them, EnableJetStream
// recovers them and their consumers from the store dir): it takes milliseconds, keeps every
// stored message and consumer position, and leaves the other accounts, the connections and the
// server alone (a server-wide JetStream restart or a new server would drop them too).
//
// Nothing the server exports tells a stream's werr either, so StoreHealth learns it from the
// server's log line (criticalWrite below; a test against the real server holds it to the
// format), and then probes the store dir itself with a small file write until the volume takes
// one again.

// criticalWrite matches nats-server's "JetStream stream '<account> > <stream>' critical write
// error: <error>", logged once when a stream's write error sticks at a publish, and
// storeCriticalWrite its file store's "Filestore [<stream>] Critical write error: <error>",
// logged once when the file store's sticks, also where no publish sees it (the removal of an
// acknowledged message from a work queue, a block's compaction): that line has no account.
var (
	criticalWrite      = regexp.MustCompile(`^JetStream stream '(.+) > (.+)' critical write error: (.*)$`)
	storeCriticalWrite = regexp.MustCompile(`^Filestore \[(.+)\] Critical write error: (.*)$`)
)

// Store names of ragwatch_store_write_failing besides those given to Watch.
const storeOther = "other"

// storeProbeEvery is how often the store dir is probed while a stream fails writes: within
// it of space or descriptors coming back, the streams write again.
var storeProbeEvery = 5 * time.Second

// probeBytes is what the probe writes: a volume that takes it has room for records again.
const probeBytes = 1 << 20

// StoreHealth follows the embedded server's streams whose writes fail, reports them (Err, the
// ragwatch_store_write_failing gauge), lets writers refuse at once (Failing) rather than wait
// for an acknowledgement that does not come, and reloads the streams once the store dir takes a
// write again. Its methods are safe on a nil *StoreHealth (an external cluster: nothing is
// known, every write is tried).
type StoreHealth struct {
	dir    string
	every  time.Duration
	logger *slog.Logger

	// reloaded runs after streams were reloaded: Connect reconnects its client, whose pull
	// consumers then ask for messages again at once. The reload drops the pull requests the
	// server held; without the reconnect a consumer notices only when its idle heartbeats
	// stop, about 25 s later (measured: TestAttackFullStoreVolumeConsumersResume).
	reloaded func()

	failing   *prometheus.GaugeVec
	recovered prometheus.Counter

	mu      sync.Mutex
	streams map[string]storeFailure // by stream name
	names   map[string]string       // stream name -> store label (Watch)
	changed context.Context         // canceled and replaced at every change of streams
	signal  context.CancelFunc      // cancels changed
}

type storeFailure struct {
	account string
	err     string
	since   time.Time
}

func newStoreHealth(dir string, every time.Duration, reg prometheus.Registerer, logger *slog.Logger) *StoreHealth {
	h := &StoreHealth{
		dir: dir, every: every, logger: logger,
		failing: promreg.MustRegister(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ragwatch_store_write_failing",
			Help: "1 while the embedded NATS server's store fails writes to the store's stream (scoring, dead_letter, alerts, join, dedup, intake; other): its volume filled or the process ran out of file descriptors. ragwatch reloads the stream once the store dir takes a write again.",
		}, []string{"store"})),
		recovered: promreg.MustRegister(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ragwatch_store_recoveries_total",
			Help: "Times the embedded NATS server's streams were reloaded after their store failed writes and the store dir took a write again.",
		})),
		streams: map[string]storeFailure{},
		names:   map[string]string{},
	}
	h.changed, h.signal = context.WithCancel(context.Background())
	return h
}

// Watch names stream's store for the gauge (a bounded, known label: scoring, dead_letter,
// alerts, join, dedup, intake); the failures of streams not watched count under "other".
func (h *StoreHealth) Watch(store, stream string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.names[stream] = store
	h.failing.WithLabelValues(store).Set(0)
}

// Failing returns an error wrapping ErrStoreWriteFailing while stream's writes fail, else nil.
func (h *StoreHealth) Failing(stream string) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	f, ok := h.streams[stream]
	h.mu.Unlock()
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: stream %s: %s", ErrStoreWriteFailing, stream, f.err)
}

// Changed is closed at the next change of the failing streams (nil on a nil StoreHealth).
func (h *StoreHealth) Changed() <-chan struct{} {
	if h == nil {
		return nil
	}
	return h.changedCtx().Done()
}

// changedCtx is canceled at the next change of the failing streams.
func (h *StoreHealth) changedCtx() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// notifyLocked ends the current changedCtx and starts the next.
func (h *StoreHealth) notifyLocked() {
	h.signal()
	h.changed, h.signal = context.WithCancel(context.Background())
}

// Err describes the streams whose writes fail, for /readyz; nil when none does.
func (h *StoreHealth) Err() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.streams) == 0 {
		return nil
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(h.streams)) {
		f := h.streams[name]
		parts = append(parts, fmt.Sprintf("%s (%s) since %s: %s", name, h.storeLocked(name), f.since.UTC().Format(time.RFC3339), f.err))
	}
	return fmt.Errorf("JetStream store cannot write to %s; what is written there is dropped (storage_full) until the store dir takes a write again, then the streams are reloaded", strings.Join(parts, ", "))
}

func (h *StoreHealth) storeLocked(stream string) string {
	if s, ok := h.names[stream]; ok {
		return s
	}
	return storeOther
}

// serverError is the embedded server's error log hook: it marks the stream of a critical
// write error. It runs under the stream's lock in the server: it only records.
func (h *StoreHealth) serverError(msg string) {
	var account, stream, cause string
	if m := criticalWrite.FindStringSubmatch(msg); m != nil {
		account, stream, cause = m[1], m[2], m[3]
	} else if m := storeCriticalWrite.FindStringSubmatch(msg); m != nil {
		stream, cause = m[1], m[2] // the account is looked up at the reload
	} else {
		return
	}
	// The cause names the block file ("write <dir>/...blk: no space left on device"): the
	// syscall's error is what an operator needs.
	if i := strings.LastIndex(cause, ": "); i >= 0 {
		cause = cause[i+2:]
	}
	h.mu.Lock()
	f, known := h.streams[stream]
	if !known {
		h.streams[stream] = storeFailure{account: account, err: cause, since: time.Now()}
		h.failing.WithLabelValues(h.storeLocked(stream)).Set(1)
		h.notifyLocked()
	} else if f.account == "" && account != "" {
		f.account = account
		h.streams[stream] = f
	}
	h.mu.Unlock()
	if !known {
		h.logger.Warn("JetStream store cannot write: writes to the stream are dropped (storage_full) until the store dir takes a write again, then ragwatch reloads the stream",
			"stream", stream, "err", cause)
	}
}

// run probes the store dir every h.every while a stream fails writes, and reloads the failing
// streams' accounts once a probe write succeeds, until stop is closed.
func (h *StoreHealth) run(s *server.Server, stop <-chan struct{}) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		failing := maps.Clone(h.streams)
		h.mu.Unlock()
		if len(failing) == 0 {
			continue
		}
		if err := writeProbe(h.dir, probeBytes); err != nil {
			continue // still full (or out of descriptors): the next tick tries again
		}
		accounts := map[string][]string{}
		var first time.Time
		for stream, f := range failing {
			if f.account == "" {
				f.account = streamAccount(s, stream)
			}
			// A stream no account holds any more (deleted) is cleared with the first reload.
			accounts[f.account] = append(accounts[f.account], stream)
			if first.IsZero() || f.since.Before(first) {
				first = f.since
			}
		}
		if gone, ok := accounts[""]; ok {
			delete(accounts, "")
			h.clear(gone)
		}
		for account, streams := range accounts {
			start := time.Now()
			if err := reloadAccount(s, account); err != nil {
				h.logger.Error("reload JetStream streams after a store write failure", "account", account, "err", err)
				continue
			}
			h.clear(streams)
			if h.reloaded != nil {
				h.reloaded()
			}
			h.recovered.Inc()
			h.logger.Info("JetStream store writes again: streams reloaded from their files",
				"streams", streams, "failing_for", time.Since(first).Round(time.Millisecond), "reload", time.Since(start).Round(time.Microsecond))
		}
	}
}

func (h *StoreHealth) clear(streams []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, stream := range streams {
		delete(h.streams, stream)
		h.failing.WithLabelValues(h.storeLocked(stream)).Set(0)
	}
	// A store label shared by two streams (other) stays 1 while one of them fails.
	for stream := range h.streams {
		h.failing.WithLabelValues(h.storeLocked(stream)).Set(1)
	}
	h.notifyLocked()
}

// streamAccount is the account holding the stream named stream, "" when none does.
func streamAccount(s *server.Server, stream string) string {
	info, err := s.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		return ""
	}
	for _, acc := range info.AccountDetails {
		for _, sd := range acc.Streams {
			if sd.Name == stream {
				return acc.Name
			}
		}
	}
	return ""
}

// reloadAccount stops the account's streams and recovers them from their files, with the
// account's JetStream limits as they were (see the comment above criticalWrite).
func reloadAccount(s *server.Server, name string) error {
	acc, err := s.LookupAccount(name)
	if err != nil {
		return fmt.Errorf("look up account: %w", err)
	}
	usage := acc.JetStreamUsage()
	limits := map[string]server.JetStreamAccountLimits{}
	if len(usage.Tiers) == 0 {
		limits[""] = usage.Limits
	} else {
		for tier, t := range usage.Tiers {
			limits[tier] = t.Limits
		}
	}
	if err := acc.DisableJetStream(); err != nil {
		return fmt.Errorf("stop streams: %w", err)
	}
	if err := acc.EnableJetStream(limits, nil); err != nil {
		return fmt.Errorf("recover streams: %w", err)
	}
	return nil
}

// writeProbe creates a file in dir, writes n bytes to it, syncs and removes it: it fails while
// the volume is full or the process has no file descriptor left.
func writeProbe(dir string, n int) error {
	f, err := os.CreateTemp(dir, ".ragwatch-write-check-*")
	if err != nil {
		return err
	}
	name := f.Name()
	defer func() { _ = os.Remove(name) }()
	if n > 0 {
		if _, err = io.CopyN(f, zeroReader{}, int64(n)); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// failingGrace is how long a write in flight is still awaited once its stream is marked
// failing: its answer may be on its way (it was stored before the failure); else none comes.
const failingGrace = 200 * time.Millisecond

// guardedKV refuses writes at once while its bucket's stream fails writes (StoreHealth), and
// ends a write in flight failingGrace after the stream is marked: the server answers neither
// the write that failed nor any later one, and each would wait out its context (at shutdown,
// the whole shutdown's).
type guardedKV struct {
	jetstream.KeyValue
	health *StoreHealth
	stream string
}

// write runs w with a context canceled failingGrace after g's stream is marked failing, and
// returns the stream's failure for a write so ended.
func (g guardedKV) write(ctx context.Context, w func(context.Context) error) error {
	if err := g.health.Failing(g.stream); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		stop func() bool
	)
	var watch func()
	watch = func() {
		mu.Lock()
		defer mu.Unlock()
		if wctx.Err() != nil {
			return
		}
		stop = context.AfterFunc(g.health.changedCtx(), func() {
			if g.health.Failing(g.stream) != nil {
				time.AfterFunc(failingGrace, cancel)
				return
			}
			watch() // another stream changed: wait for the next change
		})
	}
	watch()
	err := w(wctx)
	cancel()
	mu.Lock()
	if stop != nil { // nil when ctx had ended already
		stop() // a registration left on a context that may never end would be kept by it
	}
	mu.Unlock()
	if err != nil && ctx.Err() == nil {
		if ferr := g.health.Failing(g.stream); ferr != nil {
			return ferr
		}
	}
	return err
}

func (g guardedKV) Put(ctx context.Context, key string, value []byte) (rev uint64, err error) {
	err = g.write(ctx, func(ctx context.Context) (err error) { rev, err = g.KeyValue.Put(ctx, key, value); return err })
	return rev, err
}

func (g guardedKV) PutString(ctx context.Context, key string, value string) (rev uint64, err error) {
	err = g.write(ctx, func(ctx context.Context) (err error) { rev, err = g.KeyValue.PutString(ctx, key, value); return err })
	return rev, err
}

func (g guardedKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (rev uint64, err error) {
	err = g.write(ctx, func(ctx context.Context) (err error) {
		rev, err = g.KeyValue.Create(ctx, key, value, opts...)
		return err
	})
	return rev, err
}

func (g guardedKV) Update(ctx context.Context, key string, value []byte, revision uint64) (rev uint64, err error) {
	err = g.write(ctx, func(ctx context.Context) (err error) {
		rev, err = g.KeyValue.Update(ctx, key, value, revision)
		return err
	})
	return rev, err
}

func (g guardedKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	return g.write(ctx, func(ctx context.Context) error { return g.KeyValue.Delete(ctx, key, opts...) })
}

func (g guardedKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	return g.write(ctx, func(ctx context.Context) error { return g.KeyValue.Purge(ctx, key, opts...) })
}
