// Package store owns every SQL statement of redrive: the failures, their groups and the audit
// log in Postgres (pgx/v5), the domain types, and the state transitions of a failure
// (docs/states.md). It turns pgx errors into the domain errors ErrNotFound and ErrConflict;
// only package api maps them to HTTP statuses.
//
// A failure is stored as a record written once by the intake (failure_records), a narrow
// state that every change of state rewrites (failure_states), its idempotence key
// (failure_keys) and its stack trace, once per hash (failure_texts); records and states are
// partitioned by created_at, and retention drops whole partitions (partitions.go). The view
// failures joins them for reading; the store writes the tables (docs/operations.md, "Storage
// layout").
package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Domain errors.
var (
	// ErrNotFound means the failure or group does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the action is not allowed in the failure's current state.
	ErrConflict = errors.New("conflict")
)

// TransitionError says why a failure cannot move from its state; it wraps ErrConflict.
type TransitionError struct {
	ID     uuid.UUID
	From   State
	Action string
}

// Error names the failure, its state and the refused action.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("failure %s is %s: cannot %s", e.ID, e.From, e.Action)
}

// Unwrap returns ErrConflict.
func (e *TransitionError) Unwrap() error { return ErrConflict }

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

// Store is redrive's Postgres store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// Config configures a Store.
type Config struct {
	// Pool is the connection pool. Required.
	Pool *pgxpool.Pool
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// New returns a Store for cfg.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("invalid config: Pool is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{pool: cfg.Pool, now: cfg.Now}, nil
}

// Pool returns the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
