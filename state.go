package redrive

// State is the lifecycle state of a failure.
type State string

// The states of a failure (ARCHITECTURE.md, "State of a failure").
const (
	// StateRetryPending: temporary; the scheduler resends it at NextAttemptAt.
	StateRetryPending State = "RETRY_PENDING"
	// StatePermanent: permanent, unknown, or retries exhausted; waits for an operator.
	StatePermanent State = "PERMANENT"
	// StateResent: the original was republished; terminal.
	StateResent State = "RESENT"
	// StateClosed: dismissed by an operator with a reason; terminal.
	StateClosed State = "CLOSED"
)

// States lists every state, in lifecycle order.
var States = []State{StateRetryPending, StatePermanent, StateResent, StateClosed}

// Valid reports whether s is one of the four states.
func (s State) Valid() bool {
	switch s {
	case StateRetryPending, StatePermanent, StateResent, StateClosed:
		return true
	}
	return false
}

// Resendable reports whether a failure in state s may be resent (automatically or manually).
func (s State) Resendable() bool { return s == StateRetryPending || s == StatePermanent }

// Closable reports whether a failure in state s may be closed by an operator.
func (s State) Closable() bool { return s == StateRetryPending || s == StatePermanent }
