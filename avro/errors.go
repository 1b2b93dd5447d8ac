package avro

import (
	"errors"
	"fmt"
)

// Check names the decoding check that failed.
type Check string

// The checks a decoder makes, in the order it makes them.
const (
	CheckEmpty       Check = "empty input"
	CheckSizeLimit   Check = "size limit"
	CheckFirstByte   Check = "unknown first byte"
	CheckSchemaID    Check = "unknown schema id"
	CheckFingerprint Check = "fingerprint mismatch"
	CheckTruncated   Check = "truncated datum"
	CheckDatum       Check = "invalid datum"
	CheckTrailing    Check = "trailing bytes"
	CheckTemporality Check = "bad temporality"
	CheckNumber      Check = "non-numeric partition/offset"
)

// Sentinel errors wrapped by *DecodeError; branch on them with errors.Is.
var (
	ErrEmpty          = errors.New("empty input")
	ErrTooLarge       = errors.New("input over the size limit")
	ErrUnknownFraming = errors.New("unknown first byte")
	ErrUnknownSchema  = errors.New("unknown schema id")
	ErrFingerprint    = errors.New("fingerprint mismatch")
	ErrTruncated      = errors.New("truncated datum")
	ErrInvalidDatum   = errors.New("invalid datum")
	ErrTrailingBytes  = errors.New("trailing bytes")
	ErrBadTemporality = errors.New("bad temporality")
	ErrBadNumber      = errors.New("non-numeric partition or offset")
)

// DecodeError says which check failed while decoding an event or key, and where.
type DecodeError struct {
	// Check names the failed check.
	Check Check
	// Detail says what was wrong, with positions and values where they help.
	Detail string
	// Err is one of the sentinel errors, possibly joined with a cause.
	Err error
}

// Error returns "<check>: <detail>".
func (e *DecodeError) Error() string {
	if e.Detail == "" {
		return string(e.Check)
	}
	return fmt.Sprintf("%s: %s", e.Check, e.Detail)
}

// Unwrap returns the sentinel error (and cause) behind e.
func (e *DecodeError) Unwrap() error { return e.Err }

func decodeErr(check Check, sentinel error, format string, args ...any) *DecodeError {
	return &DecodeError{Check: check, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}
