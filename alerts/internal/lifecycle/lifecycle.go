// Package lifecycle is the state machine every alert of the alert engine and of the comparisons
// goes through: inactive → pending → firing → inactive. Its JSON form is part of the persisted
// alert state (the ragwatch_alerts bucket) and must not change.
package lifecycle

import (
	"maps"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
)

// Alert phases.
const (
	Inactive = "inactive"
	Pending  = "pending"
	Firing   = "firing"
)

// Machine is one alert's state: inactive → pending (breach seen) → firing (breach held for
// `for`) → inactive again once recovery has held for `keep_firing_for`. A pending alert whose
// breach stops goes back to inactive without a notification (flap suppression); a firing alert
// that is neither breaching nor recovered (inside the hysteresis band, or too few samples) holds.
type Machine struct {
	Phase           string    `json:"phase"`
	PendingSince    time.Time `json:"pending_since,omitzero"`
	FiringSince     time.Time `json:"firing_since,omitzero"`
	RecoveringSince time.Time `json:"recovering_since,omitzero"`
}

// Transition is what one step changed.
type Transition int

// Transitions.
const (
	NoChange Transition = iota
	Fired
	Resolved
)

// Step advances the machine at now.
func (m *Machine) Step(now time.Time, breach, recovered bool, forDur, keep time.Duration) Transition {
	switch m.Phase {
	case Pending:
		if !breach {
			*m = Machine{Phase: Inactive}
			return NoChange
		}
		if now.Sub(m.PendingSince) >= forDur {
			m.Phase, m.FiringSince = Firing, now
			return Fired
		}
	case Firing:
		if breach || !recovered {
			m.RecoveringSince = time.Time{}
			return NoChange
		}
		if m.RecoveringSince.IsZero() {
			m.RecoveringSince = now
		}
		if now.Sub(m.RecoveringSince) >= keep {
			*m = Machine{Phase: Inactive}
			return Resolved
		}
	default:
		if !breach {
			m.Phase = Inactive
			return NoChange
		}
		if forDur <= 0 {
			*m = Machine{Phase: Firing, PendingSince: now, FiringSince: now}
			return Fired
		}
		*m = Machine{Phase: Pending, PendingSince: now}
	}
	return NoChange
}

// Firing reports whether the alert is firing.
func (m *Machine) Firing() bool { return m.Phase == Firing }

// Listed returns a copy of a for an alerts list (GET /api/v1/alerts) when a is firing (and its
// state machine, firing, still is) or was resolved within retention.
func Listed(a *alerts.Alert, firing bool, now time.Time, retention time.Duration) (alerts.Alert, bool) {
	switch {
	case a == nil:
		return alerts.Alert{}, false
	case a.Status == alerts.StatusFiring && firing:
	case a.Status == alerts.StatusResolved && now.Sub(a.EndsAt) <= retention:
	default:
		return alerts.Alert{}, false
	}
	cp := *a
	cp.Labels = maps.Clone(a.Labels)
	if cp.Labels == nil {
		cp.Labels = map[string]string{}
	}
	cp.Evidence = append([]alerts.Evidence{}, a.Evidence...)
	return cp, true
}
