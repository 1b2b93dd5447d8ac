package redrive

import "github.com/google/uuid"

// MaxParkedChain bounds the failures parked behind one head that ParkedChain reads.
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
	// parked behind a head that is not stored (e.g. the guard overflowed).
	Head *ParkedLink
	// HeadRef is the head's causing message as the parked failures name it (failure_links.head):
	// the head's CausingMessage, or the guard's overflow marker when Head is nil.
	HeadRef string
	// Parked are the failures parked behind the head, in original offset order.
	Parked []ParkedLink
	// Truncated says that more than MaxParkedChain failures are parked behind the head:
	// Parked has the first of them by offset.
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
		if l.State.Resendable() {
			out = append(out, l)
		}
	}
	return out
}
