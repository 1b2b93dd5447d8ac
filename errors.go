package redrive

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// The one error vocabulary of redrive. Every package returns these (wrapped, or inside the
// *XxxError types below, which unwrap to them), so that errors.Is holds whatever layer an
// error went through: store turns pgx errors into them, the operator core and the resender
// pass them on, and only api maps them to HTTP statuses (web to pages).

// Domain errors.
var (
	// ErrNotFound means no failure, group, job or run has the id.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the state of what an operation names does not allow it (a failure
	// that is not open cannot be retried, a job that is not running cannot be paused); its
	// text says which state.
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

// ErrBadFilter means a Filter is not valid; a *FilterError wraps it.
var ErrBadFilter = errors.New("bad filter")

// FilterError names the criterion of a Filter that is not valid. It wraps ErrBadFilter.
type FilterError struct {
	// Field is the criterion's name as the API spells it (snake_case).
	Field string
	// Detail says what is wrong with it.
	Detail string
}

// Error names the criterion and the problem.
func (e *FilterError) Error() string { return e.Field + ": " + e.Detail }

// Unwrap returns ErrBadFilter.
func (e *FilterError) Unwrap() error { return ErrBadFilter }

// ErrTooBroad means a search reads too many rows: it ran out of time or is not bounded; a
// *FilterError on "payload" wraps it.
var ErrTooBroad = errors.New("search too broad")

// ErrTokenRefused means a job's start token is wrong, or its preview expired.
var ErrTokenRefused = errors.New("job token refused")

// JobStateError says a job's state does not allow an operation; it wraps ErrConflict.
type JobStateError struct {
	ID     uuid.UUID
	State  JobState
	Action string
}

func (e *JobStateError) Error() string {
	return fmt.Sprintf("job %s is %s: cannot %s", e.ID, e.State, e.Action)
}

// Unwrap returns ErrConflict.
func (e *JobStateError) Unwrap() error { return ErrConflict }

// ErrLeaseLost means the job is no longer held by the owner: its lease expired and another
// instance claimed it, or an operator paused or canceled it.
var ErrLeaseLost = errors.New("job lease lost")

// ErrClaimSettled means the claim was already settled (or released) by another runner:
// nothing was recorded.
var ErrClaimSettled = errors.New("job claim already settled")

// ErrReactivationRunning means a reactivation of the topic is running already (on this or
// another instance). It wraps ErrConflict.
var ErrReactivationRunning = fmt.Errorf("a reactivation of the dead-letter topic is running: %w", ErrConflict)

// ErrUnavailable means an action cannot be served by this instance now: resending is not
// configured, or the resender is shutting down.
var ErrUnavailable = errors.New("unavailable")

// ErrPayloadForbidden means the reader lacks the payload permission.
var ErrPayloadForbidden = errors.New("payload permission required")

// ErrNullPart means the payload part asked for (a key) is null.
var ErrNullPart = errors.New("the part is null")

// ErrTracker means the issue tracker refused or could not be reached; the text says how.
var ErrTracker = errors.New("issue tracker unavailable")

// ErrClosed means the resender was shut down: nothing more is sent.
var ErrClosed = errors.New("resender closed")

// ErrInvalidRequest means a manual resend request cannot be served as asked (no principal, too
// many ids); nothing was resent.
var ErrInvalidRequest = errors.New("invalid resend request")

// ErrBadData means Postgres cannot store an event as it is: retrying does not help.
var ErrBadData = errors.New("bad data")

// BadDataError says which event of a batch Postgres cannot store, and why. It wraps ErrBadData.
type BadDataError struct {
	// Index is the event's position in the batch, or -1 when the database refused the batch
	// without naming an event.
	Index int
	// Field names the offending field, where known.
	Field string
	// Reason says what is wrong.
	Reason string
	// Err is the database error behind the refusal, if any.
	Err error
}

// Error names the event, the field and the reason.
func (e *BadDataError) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		fmt.Fprintf(&b, "event %d: ", e.Index)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns ErrBadData and the database error, if any.
func (e *BadDataError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadData, e.Err}
	}
	return []error{ErrBadData}
}

// Size limits of the indexed texts: a btree index entry must stay under about 2.7 kB.
const (
	// MaxKeyText bounds the idempotenceId, the causing message, the topic and the publisher
	// service, in bytes.
	MaxKeyText = 1024
	// MaxGroupKey bounds the four texts of a group key together, in bytes.
	MaxGroupKey = 2048
)
