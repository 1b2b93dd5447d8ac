package redrive

import (
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
)

// Failure is one stored failure: a MessageProcessingFailedEvent and what became of it.
type Failure struct {
	ID               uuid.UUID
	State            State
	Temporality      avro.Temporality
	ErrorCode        string
	ErrorMessage     string
	ErrorDescription *string
	StackTrace       *string
	StackTraceHash   *string

	EventID          string
	IdempotenceID    string
	EventCreated     time.Time
	PublisherSystem  string
	PublisherService string
	ProcessID        *string

	// The original record, byte for byte.
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte        // nil for a null key
	Value     []byte        // nil for a null value (a tombstone, ValueNull)
	Headers   []avro.Header // in order, duplicates kept; a nil Value is a null value
	// ValueNull is true when the original value was null (a tombstone); a resend produces a
	// null value.
	ValueNull bool

	// SourceFormat is the format of the topic the intake read the failure from.
	SourceFormat SourceFormat
	// SourceTopic, SourcePartition and SourceOffset locate the record the intake read (on the
	// error topic or a foreign dead-letter topic); nil for rows stored before they were kept.
	SourceTopic     *string
	SourcePartition *int32
	SourceOffset    *int64
	// Cluster is the Kafka cluster the intake read the failure from, where its resends go
	// (DefaultCluster for rows stored before clusters had names).
	Cluster string

	// From the failed message's metadata, where known.
	MessageID            *string
	MessageIdempotenceID *string
	MessageCreated       *time.Time
	MessageSystem        *string
	MessageService       *string
	MessageType          *string
	MessageTypeVersion   *string

	// CausingMessage identifies the message across resends; Attempt counts its failures.
	CausingMessage string
	Attempt        int

	NextAttemptAt   *time.Time
	ResendFailures  int
	LastResendError *string
	ResentAt        *time.Time

	ClosedReason *string
	ClosedBy     *string
	ClosedAt     *time.Time

	GroupID   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Group gathers failures of one kind.
type Group struct {
	ID               int64
	PublisherService string
	MessageType      string
	ErrorCode        string
	StackTraceHash   string
	Ticket           *string
	Note             *string
	FirstSeen        time.Time
	LastSeen         time.Time
	// Counts are filled by queries that ask for them.
	OpenCount  int64
	TotalCount int64
}

// AuditEntry is one operator action.
type AuditEntry struct {
	ID        int64
	FailureID *uuid.UUID
	GroupID   *int64
	Action    string
	Principal string
	Reason    *string
	Details   map[string]any
	At        time.Time
}

// CausingMessage returns the identity of the message that caused a failure: the metadata eventId
// if present; else the redrive-origin header that a resend carries; else "topic/partition/offset".
func CausingMessage(e *avro.Event, headers []avro.Header) string {
	if md := e.Payload.FailedMessageMetadata; md != nil && md.EventID != nil && *md.EventID != "" {
		return *md.EventID
	}
	for i := len(headers) - 1; i >= 0; i-- {
		if headers[i].Name == avro.HeaderOrigin && len(headers[i].Value) > 0 {
			return string(headers[i].Value)
		}
	}
	m := e.References.Message
	return TopicPartitionOffset(m.TopicName, m.Partition, m.Offset)
}

// TopicPartitionOffset formats the fallback identity "topic/partition/offset".
func TopicPartitionOffset(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}

// MaxListLimit bounds ListParams.Limit.
const MaxListLimit = 500

// Order is the sort order of a failure list: by (created_at, id).
type Order int

// The sort orders of a failure list.
const (
	// NewestFirst sorts by created_at, then id, descending.
	NewestFirst Order = iota
	// OldestFirst sorts by created_at, then id, ascending.
	OldestFirst
)

// Position is a place in a failure list: the sort key of the last row of a page. The next page
// starts after it.
type Position struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// FailureSummary is what a list shows of a failure: no payload bytes, the error message cut to
// 500 characters.
type FailureSummary struct {
	ID               uuid.UUID
	State            State
	StateReason      *string
	Temporality      avro.Temporality
	ErrorCode        string
	ErrorMessage     string
	PublisherSystem  string
	PublisherService string
	Topic            string
	Partition        int32
	Offset           int64
	MessageType      *string
	CausingMessage   string
	Attempt          int
	GroupID          int64
	// KeySize is the key's length in bytes; nil for a null key.
	KeySize *int
	// ValueSize is the value's length in bytes (0 for a null value).
	ValueSize int
	// ValueNull is true when the original value was null (a tombstone).
	ValueNull bool
	// SourceFormat is the format of the topic the failure was read from; SourceTopic that topic
	// (nil for rows stored before it was kept).
	SourceFormat  SourceFormat
	SourceTopic   *string
	NextAttemptAt *time.Time
	ResentAt      *time.Time
	ClosedAt      *time.Time
	EventCreated  time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time

	// Cluster is the Kafka cluster the failure was read from.
	Cluster string
}

// Position returns the list position of s.
func (s *FailureSummary) Position() Position { return Position{CreatedAt: s.CreatedAt, ID: s.ID} }

// FailureDetail is everything stored about a failure.
type FailureDetail struct {
	Failure
	// StateReason says why the failure entered its state when the temporality does not tell.
	StateReason *string
	// LeaseOwner and LeaseUntil say which resend's live claim holds the failure, and until
	// when; both are nil when none does.
	LeaseOwner *string
	LeaseUntil *time.Time
}
