package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ragwatch/ragwatch/alerts"
)

// persisted is one rule instance's saved state.
type persisted struct {
	Version  int       `json:"version"`
	Service  string    `json:"service"`
	Instance *instance `json:"instance"`
}

// stateKey is the store key of a rule's state for a service: "<slo|drift>.<name>.<service in
// base64url>" (the service may hold characters KV keys do not allow; the encoding has no dot).
func stateKey(r *rule, service string) string {
	return r.storeKey() + "." + base64.RawURLEncoding.EncodeToString([]byte(service))
}

// Save writes every rule instance's state to the store, one key each, so that no value grows
// with the number of services.
func (e *Engine) Save(ctx context.Context) error {
	if e.store == nil {
		return nil
	}
	now := e.now()
	type item struct {
		key  string
		data []byte
	}
	var items []item
	var errs []error
	e.mu.Lock()
	forgotten := e.forgotten
	e.forgotten = nil
	for _, r := range e.rules {
		for _, service := range slices.Sorted(maps.Keys(r.instances)) {
			in := r.instances[service]
			r.stripOldExemplars(in, now)
			data, err := json.Marshal(persisted{Version: 1, Service: service, Instance: in})
			if err != nil {
				errs = append(errs, fmt.Errorf("encode alert state %s: %w", stateKey(r, service), err))
				continue
			}
			items = append(items, item{stateKey(r, service), data})
		}
	}
	e.mu.Unlock()
	saved := make(map[string]bool, len(items))
	for _, it := range items {
		saved[it.key] = true
		if err := e.store.Save(ctx, it.key, it.data); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, e.saveComparisons(ctx)...) // comparisons_persist.go
	for _, key := range forgotten {
		if saved[key] {
			continue // the service came back since: its new state was just saved
		}
		if err := e.store.Delete(ctx, key); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		e.m.saves.WithLabelValues("error").Inc()
		return err
	}
	e.m.saves.WithLabelValues("ok").Inc()
	return nil
}

// Load restores state saved by Save. State whose window shape no longer matches the config is
// dropped (logged), never misread.
func (e *Engine) Load(ctx context.Context) error {
	if e.store == nil {
		return nil
	}
	var errs []error
	for _, r := range e.rules {
		prefix := r.storeKey() + "."
		keys, err := e.store.List(ctx, prefix)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, key := range keys {
			if strings.Contains(strings.TrimPrefix(key, prefix), ".") {
				continue // another rule whose name extends this one's
			}
			data, err := e.store.Load(ctx, key)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			var p persisted
			if err := json.Unmarshal(data, &p); err != nil || p.Version != 1 || p.Instance == nil {
				e.logger.Warn("dropping unreadable alert state", "key", key, "error", err)
				continue
			}
			in := p.Instance
			if !r.compatible(in) {
				e.logger.Warn("dropping alert state from another window configuration", "key", key)
				continue
			}
			r.sanitize(in)
			if in.Machines == nil {
				in.Machines = map[string]*Machine{}
			}
			if in.Last == nil {
				in.Last = map[string]*alerts.Alert{}
			}
			for _, a := range in.Last {
				a.Notifiers = r.notifiers
			}
			e.mu.Lock()
			r.instances[p.Service] = in
			e.instance(r, p.Service)
			e.mu.Unlock()
		}
	}
	errs = append(errs, e.loadComparisons(ctx)...) // comparisons_persist.go
	return errors.Join(errs...)
}
