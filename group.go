package redrive

import "time"

// Limits of a group's operator-set fields, in characters.
const (
	MaxTicketLen = 200
	MaxNoteLen   = 10000
)

// GroupFilter selects groups. A zero field does not restrict.
type GroupFilter struct {
	// PublisherService, MessageType and ErrorCode match a group's kind exactly.
	PublisherService string
	MessageType      string
	ErrorCode        string
	// Ticket matches the operator-set ticket exactly.
	Ticket string
	// OpenOnly keeps groups that have at least one RETRY_PENDING or PERMANENT failure.
	OpenOnly bool
}

// GroupPosition is a place in a group list, sorted by last_seen then id, descending.
type GroupPosition struct {
	LastSeen time.Time
	ID       int64
}

// Position returns the list position of g.
func (g *Group) Position() GroupPosition { return GroupPosition{LastSeen: g.LastSeen, ID: g.ID} }

// GroupPatch changes a group's operator-set fields. A field whose Set flag is false is kept; a
// nil value clears it.
type GroupPatch struct {
	SetTicket bool
	Ticket    *string
	SetNote   bool
	Note      *string
}

// GroupSearch selects groups for the group pages: a GroupFilter and the criteria that only
// those pages need. A zero field does not restrict.
type GroupSearch struct {
	GroupFilter
	// NoTicket keeps groups without a ticket; it cannot be combined with Ticket.
	NoTicket bool
	// LastSeenFrom keeps groups last seen at or after it; LastSeenTo those last seen before it.
	LastSeenFrom, LastSeenTo time.Time
}

// Validate checks s: text criteria that are too long, not UTF-8 or hold a NUL, a ticket with
// NoTicket, and an empty time range are a *FilterError.
func (s GroupSearch) Validate() error {
	for _, eq := range []struct{ field, value string }{
		{"publisher_service", s.PublisherService}, {"message_type", s.MessageType},
		{"error_code", s.ErrorCode}, {"ticket", s.Ticket},
	} {
		if err := CheckFilterText(eq.field, eq.value, MaxFilterText); err != nil {
			return err
		}
	}
	if s.NoTicket && s.Ticket != "" {
		return &FilterError{Field: "no_ticket", Detail: "give ticket or no_ticket, not both"}
	}
	if !s.LastSeenFrom.IsZero() && !s.LastSeenTo.IsZero() && !s.LastSeenFrom.Before(s.LastSeenTo) {
		return &FilterError{Field: "last_seen_to", Detail: "the range is empty: last_seen_to is not after last_seen_from"}
	}
	return nil
}

// GroupSummary is a group of a group page: the group with its counts, and the error message
// of its most recent failure as a sample of what its failures say.
type GroupSummary struct {
	Group
	// SampleMessage is the error message of the group's most recent failure; "" when the
	// group has none left (retention removed them).
	SampleMessage string
}

// GroupKind is what makes a group: its kind, and its operator-set ticket and note.
type GroupKind struct {
	PublisherService, MessageType, ErrorCode, StackTraceHash string
	Ticket, Note                                             *string
}
