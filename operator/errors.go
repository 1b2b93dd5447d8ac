package operator

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/redrive/redrive"
)

// ErrNotFound means no failure, group, job or run has the id.
//
// Deprecated: use redrive.ErrNotFound, the same value.
var ErrNotFound = redrive.ErrNotFound

// ErrUnavailable means an action cannot be served by this instance now: resending is not
// configured, or the resender is shutting down.
//
// Deprecated: use redrive.ErrUnavailable, the same value.
var ErrUnavailable = redrive.ErrUnavailable

// ErrConflict means the state of what an operation names does not allow it (a job that is
// not running cannot be paused); its text says which state.
//
// Deprecated: use redrive.ErrConflict, the same value.
var ErrConflict = redrive.ErrConflict

// ErrPayloadForbidden means the reader lacks the payload permission.
//
// Deprecated: use redrive.ErrPayloadForbidden, the same value.
var ErrPayloadForbidden = redrive.ErrPayloadForbidden

// ErrNullPart means the payload part asked for (a key) is null.
//
// Deprecated: use redrive.ErrNullPart, the same value.
var ErrNullPart = redrive.ErrNullPart

// InputError is a client's mistake: it names the field at fault and says what is wrong, in
// text safe to show to the client.
type InputError struct {
	// Field is the parameter or JSON member at fault, in snake_case; empty for the request as
	// a whole.
	Field string
	// Detail says what is wrong.
	Detail string
	// Unprocessable is true for a well-formed request that cannot be served as asked (a
	// selection over the bulk cap, a payload that is not in the format asked for).
	Unprocessable bool
	// Forbidden is true for a criterion the asker may not use: a search of payload bytes
	// without the payload permission, or of bytes the masking rules hide (403). A forbidden
	// InputError also matches redrive.ErrPayloadForbidden.
	Forbidden bool
}

// Error names the field and the problem.
func (e *InputError) Error() string {
	if e.Field == "" {
		return e.Detail
	}
	return e.Field + ": " + e.Detail
}

// Unwrap returns redrive.ErrPayloadForbidden for a forbidden criterion, else nil.
func (e *InputError) Unwrap() error {
	if e.Forbidden {
		return redrive.ErrPayloadForbidden
	}
	return nil
}

// Status is the HTTP status the translators answer e with: 403 when Forbidden, 422 when
// Unprocessable, else 400.
func (e *InputError) Status() int {
	if e.Forbidden {
		return http.StatusForbidden
	}
	if e.Unprocessable {
		return http.StatusUnprocessableEntity
	}
	return http.StatusBadRequest
}

// invalid returns an *InputError naming field.
func invalid(field, format string, args ...any) error {
	return &InputError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

// unprocessable returns an *InputError for a well-formed request that cannot be served.
func unprocessable(field, format string, args ...any) error {
	return &InputError{Field: field, Detail: fmt.Sprintf(format, args...), Unprocessable: true}
}

// forbidden returns an *InputError for a criterion the asker may not use.
func forbidden(field, format string, args ...any) error {
	return &InputError{Field: field, Detail: fmt.Sprintf(format, args...), Forbidden: true}
}

// fromStore turns a *redrive.FilterError into an *InputError; the other domain errors pass
// unchanged (the store returns the same values the core does).
func fromStore(err error) error {
	var fe *redrive.FilterError
	if errors.As(err, &fe) {
		return &InputError{Field: fe.Field, Detail: fe.Detail}
	}
	return err
}
