package labelcal

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Store keeps the maps in a JetStream KV bucket, one key per (service, metric); every put is a
// new revision, which is the map's Version, and the bucket's history keeps the earlier ones.
type Store struct {
	KV jetstream.KeyValue
}

// keyPrefix starts every key; the service and metric are base64url-encoded, since a service
// name may hold characters a KV key cannot.
const keyPrefix = "labelcal."

func key(service, metric string) string {
	enc := base64.RawURLEncoding
	return keyPrefix + enc.EncodeToString([]byte(service)) + "." + enc.EncodeToString([]byte(metric))
}

// Put stores m as the newest version of its series and returns it with its Version set.
func (s *Store) Put(ctx context.Context, m Map) (Map, error) {
	m.Version = 0
	b, err := json.Marshal(m)
	if err != nil {
		return m, err
	}
	rev, err := s.KV.Put(ctx, key(m.Service, m.Metric), b)
	if err != nil {
		return m, fmt.Errorf("store calibration map: %w", err)
	}
	m.Version = rev
	return m, nil
}

func decode(e jetstream.KeyValueEntry) (Map, error) {
	var m Map
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		return m, fmt.Errorf("calibration map %s revision %d: %w", e.Key(), e.Revision(), err)
	}
	m.Version = e.Revision()
	return m, nil
}

// Current returns the newest version of every series. An entry that does not decode is
// skipped and reported in the joined error, with the others returned.
func (s *Store) Current(ctx context.Context) ([]Map, error) {
	lister, err := s.KV.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list calibration maps: %w", err)
	}
	var out []Map
	var errs []error
	for k := range lister.Keys() {
		e, err := s.KV.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m, err := decode(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, m)
	}
	return out, errors.Join(errs...)
}

// History returns the versions of one series the bucket keeps, oldest first.
func (s *Store) History(ctx context.Context, service, metric string) ([]Map, error) {
	entries, err := s.KV.History(ctx, key(service, metric))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("calibration map history: %w", err)
	}
	out := make([]Map, 0, len(entries))
	for _, e := range entries {
		if e.Operation() != jetstream.KeyValuePut {
			continue
		}
		m, err := decode(e)
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}
