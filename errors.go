package redrive

import (
	"errors"
	"fmt"
	"strings"
)

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
