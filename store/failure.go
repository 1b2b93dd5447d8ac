package store

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

// causingMessage is CausingMessage for an incoming failure; when it would fall back to a
// position the source does not know (UnknownPosition), it is the record's position on the source
// topic instead, so that unrelated failures of a raw source do not share one identity.
func (in Incoming) causingMessage() string {
	cm := CausingMessage(in.Event, in.Headers)
	m := in.Event.References.Message
	if in.Source.Topic != "" && (m.Partition == UnknownPosition || m.Offset == UnknownPosition) &&
		cm == TopicPartitionOffset(m.TopicName, m.Partition, m.Offset) {
		return TopicPartitionOffset(in.Source.Topic, in.Source.Partition, in.Source.Offset)
	}
	return cm
}

// TopicPartitionOffset formats the fallback identity "topic/partition/offset".
func TopicPartitionOffset(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}
