package config

import "time"

// Variants configures where a record's variant comes from and how many distinct variants
// metric labels keep.
type Variants struct {
	// Attributes are the span and resource attribute keys read, in order, when a trace has no
	// `rag.variant`.
	Attributes []string `yaml:"attributes"`
	// MaxValues bounds the distinct values of the `variant` label; beyond it: "other".
	MaxValues int `yaml:"max_values"`
}

func defaultVariants() Variants {
	return Variants{Attributes: []string{"feature_flag.result.variant", "service.version"}, MaxValues: 8}
}

// Validate implements Validator.
func (v Variants) Validate() error {
	var errs []error
	for i, a := range v.Attributes {
		if a == "" {
			errs = append(errs, Invalid("attributes", "entry %d is empty", i))
		}
	}
	if v.MaxValues < 1 || v.MaxValues > 1000 {
		errs = append(errs, Invalid("max_values", "must be between 1 and 1000, got %d", v.MaxValues))
	}
	return joinErrs(errs)
}

// Conversation bounds the history a record carries and how long a session's earlier turns
// are remembered to give later turns their history.
type Conversation struct {
	// SessionTTL is how long a session's turns are remembered after its last turn.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// MaxSessions bounds the sessions remembered; the least recent is dropped beyond it.
	MaxSessions int `yaml:"max_sessions"`
	// MaxHistoryTurns and MaxHistoryBytes bound a record's history (messages, content bytes);
	// the oldest messages are dropped first.
	MaxHistoryTurns int `yaml:"max_history_turns"`
	MaxHistoryBytes int `yaml:"max_history_bytes"`
}

func defaultConversation() Conversation {
	return Conversation{SessionTTL: 30 * time.Minute, MaxSessions: 20000, MaxHistoryTurns: 10, MaxHistoryBytes: 16 << 10}
}

// Validate implements Validator.
func (c Conversation) Validate() error {
	var errs []error
	if c.SessionTTL < 0 {
		errs = append(errs, Invalid("session_ttl", "must not be negative (0 disables the session join)"))
	}
	if c.MaxSessions < 0 {
		errs = append(errs, Invalid("max_sessions", "must not be negative"))
	}
	if c.MaxHistoryTurns < 0 || c.MaxHistoryTurns > 1000 {
		errs = append(errs, Invalid("max_history_turns", "must be between 0 and 1000"))
	}
	if c.MaxHistoryBytes < 0 || c.MaxHistoryBytes > 1<<20 {
		errs = append(errs, Invalid("max_history_bytes", "must be between 0 and 1048576"))
	}
	return joinErrs(errs)
}

// Pairs configures the join of shadow pairs: two records with the same pair_id.
type Pairs struct {
	// Wait is how long the first record of a pair waits for the second; then it is orphaned.
	Wait time.Duration `yaml:"wait"`
	// MaxPending bounds the first halves waiting; the oldest is orphaned beyond it.
	MaxPending int `yaml:"max_pending"`
	// Judge is the pairwise judge of joined pairs: builtin, openai or anthropic (the latter two
	// use scoring.openai / scoring.anthropic). docs/pairwise.md.
	Judge string `yaml:"judge"`
}

func defaultPairs() Pairs {
	return Pairs{Wait: 10 * time.Minute, MaxPending: 10000, Judge: BackendBuiltin}
}

// Validate implements Validator.
func (p Pairs) Validate() error {
	var errs []error
	if p.Wait <= 0 {
		errs = append(errs, Invalid("wait", "must be positive"))
	}
	if p.MaxPending <= 0 {
		errs = append(errs, Invalid("max_pending", "must be positive"))
	}
	switch p.Judge {
	case BackendBuiltin, BackendOpenAI, BackendAnthropic:
	default:
		errs = append(errs, Invalid("judge", "must be builtin, openai or anthropic, got %q", p.Judge))
	}
	return joinErrs(errs)
}
