package web

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// Backend is what the pages need from the rest of redrive: queries on the failures, their
// groups and the audit log, and the operator actions. StoreBackend implements it on the store
// and the resender.
type Backend interface {
	// ListFailures returns one page of the failures that q selects, newest first.
	ListFailures(ctx context.Context, q ListQuery) (FailurePage, error)
	// Failure returns everything about one failure, with its attempt chain and audit log.
	// It returns an error wrapping ErrNotFound when no failure has the id.
	Failure(ctx context.Context, id uuid.UUID) (*FailureDetail, error)
	// Stats returns the overview figures, with failures over time counted in buckets of the
	// given width from since until now.
	Stats(ctx context.Context, since time.Time, bucket time.Duration) (*Stats, error)
	// ListGroups returns one page of the groups, most recently seen first.
	ListGroups(ctx context.Context, q GroupQuery) (GroupPage, error)
	// UpdateGroup sets the ticket and note of a group (an empty string clears one) and records
	// the change in the audit log. It returns an error wrapping ErrNotFound for an unknown id.
	UpdateGroup(ctx context.Context, id int64, u GroupUpdate, by Principal) (*Group, error)
	// CountMatching counts the failures that a retry or a close of t would affect now, those in
	// RETRY_PENDING or PERMANENT, ignoring t.Limit: the dry run of an action.
	CountMatching(ctx context.Context, t Target) (int64, error)
	// Retry resends the failures that t selects, as stored, to their original topics.
	Retry(ctx context.Context, t Target, req ActionRequest) (ActionResult, error)
	// Close closes the failures that t selects with req.Reason, which is required.
	Close(ctx context.Context, t Target, req ActionRequest) (ActionResult, error)
}

// ErrNotFound means the failure or group does not exist.
var ErrNotFound = errors.New("not found")

// ErrInvalid means a request cannot be served as asked (a bad filter, a missing reason); its
// text is safe to show to the operator.
var ErrInvalid = errors.New("invalid request")

// Filter selects failures. A zero field does not restrict; the criteria combine with AND, the
// values of a list with OR. Its URL form is described by ParseFilter.
type Filter struct {
	States           []store.State
	Temporalities    []avro.Temporality
	Topic            string
	PublisherService string
	MessageType      string
	ErrorCode        string
	GroupID          int64
	// Search keeps failures whose error message contains it, ignoring case.
	Search string
	// Key keeps failures whose original key is exactly these UTF-8 bytes.
	Key string
	// From keeps failures received at or after it, To those received before it.
	From, To time.Time
}

// ListQuery selects a page of failures.
type ListQuery struct {
	Filter Filter
	// Cursor is the opaque position after which the page starts; empty for the first page.
	Cursor string
	// Limit is the page size.
	Limit int
}

// FailurePage is one page of a failure list.
type FailurePage struct {
	Items []FailureRow
	// Next is the cursor of the next page; empty on the last page.
	Next string
}

// FailureRow is a failure as the list shows it.
type FailureRow struct {
	ID               uuid.UUID
	ReceivedAt       time.Time
	Topic            string
	Partition        int32
	Offset           int64
	PublisherService string
	MessageType      string
	ErrorCode        string
	ErrorMessage     string
	Temporality      avro.Temporality
	State            store.State
	Attempt          int
	NextAttemptAt    *time.Time
}

// FailureDetail is everything the detail page shows of a failure.
type FailureDetail struct {
	FailureRow
	StateReason      string
	ErrorDescription string
	StackTrace       string
	StackTraceHash   string
	EventID          string
	IdempotenceID    string
	FailedAt         time.Time
	PublisherSystem  string
	ProcessID        string
	// Key is nil for a null key; Value holds the original value bytes exactly.
	Key     []byte
	Value   []byte
	Headers []avro.Header
	// Message metadata of the failed record, empty where unknown.
	MessageID          string
	MessageType        string
	MessageTypeVersion string
	MessageSystem      string
	MessageService     string
	MessageCreated     *time.Time
	CausingMessage     string
	ResendFailures     int
	LastResendError    string
	ResentAt           *time.Time
	ClosedReason       string
	ClosedBy           string
	ClosedAt           *time.Time
	GroupID            int64
	UpdatedAt          time.Time
	// Chain lists the failures of the same causing message, first attempt first.
	Chain []FailureRow
	// Audit lists the operator actions on the failure, oldest first.
	Audit []AuditEntry
}

// AuditEntry is one operator action.
type AuditEntry struct {
	At        time.Time
	Action    string
	Principal string
	Reason    string
	Details   map[string]any
}

// Stats are the overview figures.
type Stats struct {
	// ByState counts the failures in each state; ByTemporality the open failures (RETRY_PENDING
	// or PERMANENT) of each temporality.
	ByState       map[store.State]int64
	ByTemporality map[avro.Temporality]int64
	// TopTopics and TopServices rank topics and publisher services by open failures.
	TopTopics   []NameCount
	TopServices []NameCount
	// OldestOpen is when the oldest open failure was received; nil when none is open.
	OldestOpen *time.Time
	// Buckets count the failures received per time bucket, oldest first.
	Buckets []Bucket
}

// NameCount is a name with a count.
type NameCount struct {
	Name  string
	Count int64
}

// Bucket counts the failures received in [Start, Start+width).
type Bucket struct {
	Start time.Time
	Count int64
}

// GroupQuery selects a page of groups.
type GroupQuery struct {
	Cursor string
	Limit  int
}

// GroupPage is one page of groups.
type GroupPage struct {
	Items []Group
	Next  string
}

// Group gathers failures of one kind.
type Group struct {
	ID               int64
	PublisherService string
	MessageType      string
	ErrorCode        string
	StackTraceHash   string
	Ticket           string
	Note             string
	FirstSeen        time.Time
	LastSeen         time.Time
	OpenCount        int64
	TotalCount       int64
}

// GroupUpdate is an operator's edit of a group.
type GroupUpdate struct {
	Ticket string
	Note   string
}

// Target says which failures an action applies to: the listed ids, or (when IDs is empty) the
// oldest Limit failures that Filter selects among those the action applies to.
type Target struct {
	IDs    []uuid.UUID
	Filter Filter
	Limit  int
}

// ActionRequest says who asks for an action and why.
type ActionRequest struct {
	Principal string
	Reason    string
}

// ActionResult sums up an action.
type ActionResult struct {
	// Done counts the failures resent or closed; Skipped those in a state the action does not
	// apply to (or changed meanwhile); NotFound the unknown ids; Failed the others.
	Done, Skipped, NotFound, Failed int
	// Errors holds up to a few messages about the failed ones.
	Errors []string
}
