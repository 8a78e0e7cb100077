package export

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
)

// The kept records live in a KV bucket under at most max_records keys, "r.<slot>": a record
// takes the slot of one the store evicted (or a never used one), overwriting it, so the bucket
// never holds more keys than the store holds records and no delete markers pile up; each
// changed record (new, scored, labelled) is written once per flush interval, redacted, with
// its sequence number (arrival order). At start the keys are read back in sequence order
// through the store's own bounds (max_records, max_bytes), which rebuilds the pool as it was;
// a record re-written for a late label or score keeps its sequence, so its place in the order.
const slotPrefix = "r."

// persisted is a kept record as the bucket holds it.
type persisted struct {
	Seq    uint64             `json:"seq"`
	Record record.Record      `json:"record"`
	Scores map[string]float64 `json:"scores,omitempty"`
}

// PersistOptions configure the bucket behind a Store.
type PersistOptions struct {
	KV            jetstream.KeyValue
	FlushInterval time.Duration // default 1s
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
}

// persister writes the store's changed records to the bucket.
type persister struct {
	o       PersistOptions
	errs    *prometheus.CounterVec
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started atomic.Bool
	loaded  int
}

// Persist makes the store write its records to o.KV, and Start read them back. Call before
// Start and before the first record.
func (s *Store) Persist(o PersistOptions) error {
	if o.KV == nil {
		return errors.New("export: Persist needs a KV bucket")
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p := &persister{o: o, stop: make(chan struct{}), done: make(chan struct{}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_export_state_errors_total",
			Help: "Failed reads and writes of the export store's bucket (export.bucket), by operation: put, load, delete.",
		}, []string{"op"})}
	for _, op := range []string{"put", "load", "delete"} {
		p.errs.WithLabelValues(op)
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(p.errs); err != nil {
			return fmt.Errorf("export: register metrics: %w", err)
		}
	}
	s.p = p
	s.dirty = map[*item]struct{}{}
	return nil
}

// Start reads the records kept in the bucket back into the store, then writes changes every
// flush interval until Shutdown. Without Persist it does nothing.
func (s *Store) Start(ctx context.Context) error {
	if s.p == nil {
		return nil
	}
	s.load(ctx)
	s.p.started.Store(true)
	go s.flushLoop()
	return nil
}

// Shutdown writes what changed since the last flush and stops. Idempotent; safe without
// Start.
func (s *Store) Shutdown(ctx context.Context) error {
	if s.p == nil {
		return nil
	}
	first := false
	s.p.once.Do(func() { close(s.p.stop); first = true })
	if !s.p.started.Load() {
		if first {
			s.flush(ctx)
		}
		return nil
	}
	select {
	case <-s.p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) flushLoop() {
	defer close(s.p.done)
	t := time.NewTicker(s.p.o.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.flush(context.Background())
		case <-s.p.stop:
			s.flush(context.Background())
			return
		}
	}
}

// flush writes every record changed since the last flush, redacted, to its slot. Under mu it
// only copies them (the record path waits on mu); redaction and JSON come after.
func (s *Store) flush(ctx context.Context) {
	type change struct {
		slot int
		p    persisted
	}
	s.mu.Lock()
	changes := make([]change, 0, len(s.dirty))
	for it := range s.dirty {
		// A shallow copy: a record's fields are replaced, never changed in place, but for its
		// scores.
		changes = append(changes, change{it.slot, persisted{Seq: it.seq, Record: it.rec, Scores: cloneScores(it.scores)}})
	}
	clear(s.dirty)
	s.mu.Unlock()
	for _, c := range changes {
		c.p.Record = s.redacted(&c.p.Record)
		data, err := json.Marshal(c.p)
		if err == nil {
			_, err = s.p.o.KV.Put(ctx, slotPrefix+strconv.Itoa(c.slot), data)
		}
		if err != nil {
			s.p.errs.WithLabelValues("put").Inc()
			s.p.o.Logger.Warn("export store: record not persisted", "error", err)
		}
	}
}

// load reads the bucket's records back in sequence order through the store's bounds. Keys no
// kept record holds (records evicted meanwhile, an older copy of a record seen again, slots
// beyond a smaller max_records) are deleted.
func (s *Store) load(ctx context.Context) {
	kv := s.p.o.KV
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		s.p.errs.WithLabelValues("load").Inc()
		s.p.o.Logger.Warn("export store: records not read back", "error", err)
		return
	}
	type loaded struct {
		persisted
		slot int
	}
	var items []loaded
	keys := map[int]string{}
	for key := range lister.Keys() {
		slot, ok := strings.CutPrefix(key, slotPrefix)
		n, err := strconv.Atoi(slot)
		if !ok || err != nil || n < 0 {
			continue
		}
		keys[n] = key
		e, err := kv.Get(ctx, key)
		if err != nil {
			s.p.errs.WithLabelValues("load").Inc()
			continue
		}
		var p persisted
		if err := json.Unmarshal(e.Value(), &p); err != nil {
			s.p.errs.WithLabelValues("load").Inc()
			continue
		}
		items = append(items, loaded{p, n})
	}
	slices.SortFunc(items, func(a, b loaded) int { return cmp.Compare(a.Seq, b.Seq) })
	s.mu.Lock()
	s.loading++
	for i := range items {
		slot := items[i].slot
		if slot >= s.o.MaxRecords {
			slot = -1 // a new one below
		}
		s.insert(&items[i].Record, items[i].Seq, items[i].Scores, slot)
	}
	s.loading--
	clear(s.dirty) // as the bucket holds them
	used := map[int]bool{}
	var moved []*item
	for e := s.order.Front(); e != nil; e = e.Next() {
		it := e.Value.(*item)
		if it.slot < 0 || used[it.slot] {
			moved = append(moved, it)
			continue
		}
		used[it.slot] = true
	}
	s.free, s.nextSlot = s.free[:0], s.o.MaxRecords
	for n := s.o.MaxRecords - 1; n >= 0; n-- {
		if !used[n] {
			s.free = append(s.free, n)
		}
	}
	for _, it := range moved { // from slots beyond max_records
		it.slot = s.takeSlot()
		used[it.slot] = true
		s.changed(it)
	}
	s.p.loaded = s.order.Len()
	var stale []string
	for n, key := range keys {
		if !used[n] {
			stale = append(stale, key)
		}
	}
	s.mu.Unlock()
	for _, key := range stale {
		if err := kv.Delete(ctx, key); err != nil {
			s.p.errs.WithLabelValues("delete").Inc()
		}
	}
}

// Loaded is how many records Start read back from the bucket.
func (s *Store) Loaded() int {
	if s.p == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p.loaded
}
