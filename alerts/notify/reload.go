package notify

import (
	"errors"
	"reflect"

	"github.com/ragwatch/ragwatch/config"
)

// Update replaces the notifiers with those of a reloaded config. A notifier whose config is
// unchanged keeps its worker, queue, rate limiter and repeat state (what it already delivered
// is not sent again); a changed one gets a new worker, and the old worker, like that of a
// removed notifier, delivers what it has queued and stops. Secrets are read from the
// environment again only for new or changed notifiers. On error (a notifier that cannot be
// built, e.g. its secret variable is unset) nothing changes.
func (d *Dispatcher) Update(cfgs []config.Notifier) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("notify dispatcher is shut down")
	}
	old := map[string]*worker{}
	for _, w := range d.workers {
		old[w.name] = w
	}
	var changed []config.Notifier
	for _, c := range cfgs {
		if w := old[c.Name]; w == nil || !reflect.DeepEqual(w.cfg, c) {
			changed = append(changed, c)
		}
	}
	entries, err := buildAll(changed, d.opts)
	if err != nil {
		return err
	}
	built := map[string]Entry{}
	for _, e := range entries {
		built[e.Config.Name] = e
	}
	var next []*worker
	for _, c := range cfgs {
		if e, ok := built[c.Name]; ok {
			w := d.newWorker(e)
			if d.started {
				d.run(w)
			}
			next = append(next, w)
			continue
		}
		next = append(next, old[c.Name])
		delete(old, c.Name)
	}
	for _, w := range old { // replaced or removed: drain and stop
		close(w.q)
	}
	d.workers = next
	return nil
}
