package golden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// State is what a run leaves for the next: when it ran, the judges' versions it ran with, and
// its answers. It is stored as JSON; the field names are its wire format.
type State struct {
	Time time.Time `json:"time"`
	// Versions are the judges' fingerprints by metric (definition version and model).
	Versions map[string]string `json:"versions"`
	// Answers are the judges' values by series ("judge/metric"), then item id.
	Answers map[string]map[string]float64 `json:"answers"`
	// Agreement is each series' agreement (1 − mean absolute error against the people).
	Agreement map[string]float64 `json:"agreement"`
}

// Store keeps the last run's State. Load returns nil, nil when there is none.
type Store interface {
	Load(ctx context.Context) (*State, error)
	Save(ctx context.Context, s *State) error
}

// MemoryStore keeps the state in memory (tests, and a process without NATS state).
type MemoryStore struct {
	mu sync.Mutex
	s  []byte
}

// Load implements Store.
func (m *MemoryStore) Load(context.Context) (*State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.s == nil {
		return nil, nil
	}
	var s State
	return &s, json.Unmarshal(m.s, &s)
}

// Save implements Store.
func (m *MemoryStore) Save(_ context.Context, s *State) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s = b
	return nil
}

// KVStore keeps the state under one key of a JetStream KV bucket, so that it survives a
// restart and replicas sharing the cluster see the same previous run.
type KVStore struct {
	KV  jetstream.KeyValue
	Key string // "state" when empty
}

func (k KVStore) key() string {
	if k.Key == "" {
		return "state"
	}
	return k.Key
}

// Load implements Store.
func (k KVStore) Load(ctx context.Context) (*State, error) {
	e, err := k.KV.Get(ctx, k.key())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load golden state: %w", err)
	}
	var s State
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		return nil, fmt.Errorf("load golden state: %w", err)
	}
	return &s, nil
}

// Save implements Store.
func (k KVStore) Save(ctx context.Context, s *State) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if _, err := k.KV.Put(ctx, k.key(), b); err != nil {
		return fmt.Errorf("save golden state: %w", err)
	}
	return nil
}
