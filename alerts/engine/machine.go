package engine

import "github.com/ragwatch/ragwatch/alerts/internal/lifecycle"

// The alert state machine is alerts/internal/lifecycle's, shared with the comparisons; these
// names keep the engine's code and persisted instances reading as before.
type (
	// Machine is one alert's state (lifecycle.Machine).
	Machine = lifecycle.Machine
	// Transition is what one step changed (lifecycle.Transition).
	Transition = lifecycle.Transition
)

// Phases and transitions of lifecycle.
const (
	phaseInactive = lifecycle.Inactive
	phasePending  = lifecycle.Pending
	phaseFiring   = lifecycle.Firing

	NoChange = lifecycle.NoChange
	Fired    = lifecycle.Fired
	Resolved = lifecycle.Resolved
)
