package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound is returned by Store.Load for a key never saved.
var ErrNotFound = errors.New("alert state not found")

// Store persists window state across restarts, one value per SLO or detector and service.
// Keys use only the characters JetStream KV allows ([-/_=.a-zA-Z0-9]).
type Store interface {
	Load(ctx context.Context, key string) ([]byte, error)
	Save(ctx context.Context, key string, data []byte) error
	// List returns the keys starting with prefix.
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete removes a key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// KVStore keeps state in a JetStream key-value bucket.
type KVStore struct {
	KV jetstream.KeyValue
}

// Load implements Store.
func (s KVStore) Load(ctx context.Context, key string) ([]byte, error) {
	e, err := s.KV.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load alert state %s: %w", key, err)
	}
	return e.Value(), nil
}

// Save implements Store.
func (s KVStore) Save(ctx context.Context, key string, data []byte) error {
	if _, err := s.KV.Put(ctx, key, data); err != nil {
		return fmt.Errorf("save alert state %s: %w", key, err)
	}
	return nil
}

// Delete implements Store. Purge drops the key's history too; listing skips the marker it leaves.
func (s KVStore) Delete(ctx context.Context, key string) error {
	if err := s.KV.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete alert state %s: %w", key, err)
	}
	return nil
}

// List implements Store.
func (s KVStore) List(ctx context.Context, prefix string) ([]string, error) {
	l, err := s.KV.ListKeysFiltered(ctx, prefix+">")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list alert state %s: %w", prefix, err)
	}
	defer func() { _ = l.Stop() }()
	var keys []string
	for k := range l.Keys() {
		keys = append(keys, k)
	}
	return keys, nil
}

// MemStore keeps state in memory (tests, and runs without NATS).
type MemStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

// Load implements Store.
func (s *MemStore) Load(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte(nil), v...), nil
}

// Save implements Store.
func (s *MemStore) Save(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[key] = append([]byte(nil), data...)
	return nil
}

// Delete implements Store.
func (s *MemStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

// List implements Store.
func (s *MemStore) List(_ context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

var (
	_ Store = KVStore{}
	_ Store = (*MemStore)(nil)
)
