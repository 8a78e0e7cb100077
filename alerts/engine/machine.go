package engine

import "time"

// Alert phases.
const (
	phaseInactive = "inactive"
	phasePending  = "pending"
	phaseFiring   = "firing"
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
	case phasePending:
		if !breach {
			*m = Machine{Phase: phaseInactive}
			return NoChange
		}
		if now.Sub(m.PendingSince) >= forDur {
			m.Phase, m.FiringSince = phaseFiring, now
			return Fired
		}
	case phaseFiring:
		if breach || !recovered {
			m.RecoveringSince = time.Time{}
			return NoChange
		}
		if m.RecoveringSince.IsZero() {
			m.RecoveringSince = now
		}
		if now.Sub(m.RecoveringSince) >= keep {
			*m = Machine{Phase: phaseInactive}
			return Resolved
		}
	default:
		if !breach {
			m.Phase = phaseInactive
			return NoChange
		}
		if forDur <= 0 {
			*m = Machine{Phase: phaseFiring, PendingSince: now, FiringSince: now}
			return Fired
		}
		*m = Machine{Phase: phasePending, PendingSince: now}
	}
	return NoChange
}

// Firing reports whether the alert is firing.
func (m *Machine) Firing() bool { return m.Phase == phaseFiring }
