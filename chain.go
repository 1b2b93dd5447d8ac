package redrive

import "github.com/google/uuid"

// MaxParkedChain bounds the failures of one key and partition that ParkedChain reads.
const MaxParkedChain = 1000

// ParkedLink is one member of an ordering guard's chain: the latest failure of one causing
// message of the key.
type ParkedLink struct {
	// ID is the member's latest failure (its highest attempt).
	ID             uuid.UUID
	CausingMessage string
	State          State
	ErrorCode      string
	// Offset is the record's original offset: that of the causing message's first failure
	// (later attempts are resends, at later offsets).
	Offset int64
}

// ParkedChain is the ordering-guard chain a failure belongs to (errorhandler.Ordering): the
// head a parked failure waits for, and the failures parked behind a head.
type ParkedChain struct {
	// Head is the failure the chain waits for; nil when the failure is not parked, or is
	// parked with no head stored (e.g. the guard overflowed).
	Head *ParkedLink
	// Parked are the failures parked behind the head (the failure itself when it is the head),
	// in original offset order.
	Parked []ParkedLink
	// Truncated says that the key has more than MaxParkedChain failures on its partition: the
	// chain was derived from the latest of them (by offset).
	Truncated bool
}

// IsZero reports whether the failure is in no chain: neither parked nor a head with parked
// failures.
func (c ParkedChain) IsZero() bool { return c.Head == nil && len(c.Parked) == 0 }

// Open returns the parked failures that an action may still resend (RETRY_PENDING or
// PERMANENT), in offset order.
func (c ParkedChain) Open() []ParkedLink {
	var out []ParkedLink
	for _, l := range c.Parked {
		if l.State == StateRetryPending || l.State == StatePermanent {
			out = append(out, l)
		}
	}
	return out
}
