package avro

import (
	"fmt"
	"time"
)

// Temporality says whether retrying a failed message may help.
type Temporality string

// The three temporalities of the contract; anything else is a bad event.
const (
	Temporary Temporality = "TEMPORARY"
	Permanent Temporality = "PERMANENT"
	Unknown   Temporality = "UNKNOWN"
)

// Valid reports whether t is one of TEMPORARY, PERMANENT or UNKNOWN.
func (t Temporality) Valid() bool {
	return t == Temporary || t == Permanent || t == Unknown
}

// Values that jEAP writes and a compatible producer writes too.
const (
	EventTypeName        = "MessageProcessingFailedEvent"
	EventTypeVersion     = "1.0.0"
	DomainEventVersion   = "1.3.0"
	MessageReferenceType = "message"
	ErrorTypeException   = "exception"
	// EmptyContent is what jEAP writes as originalMessage for an empty or absent value.
	EmptyContent = "EMPTY_CONTENT"
	// MaxStackTrace is the length at which stack traces are cut (followed by "...").
	MaxStackTrace = 7000
)

// Standard error codes of the contract.
const (
	CodeDeserializationFailed = "DESERIALIZATION_FAILED"
	CodeWrongEventType        = "WRONG_EVENT_TYPE"
	CodeUnknownException      = "UNKNOWN_EXCEPTION"
	CodeInvalidException      = "INVALID_EXCEPTION"
)

// Header names that the contract reserves.
const (
	// HeadersEntry is the metadata map entry holding the complete ordered header list.
	HeadersEntry = "redrive-headers"
	// HeaderTargetService names the service a resent record is meant for.
	HeaderTargetService = "jeap_eh_target_service"
	// HeaderErrorHandlingService names the service that resent the record.
	HeaderErrorHandlingService = "jeap_eh_error_handling_service"
	// HeaderOrigin carries the causing-message identity on a resent record.
	HeaderOrigin = "redrive-origin"
	// ValueNullEntry is the metadata map entry that marks a null original value (a tombstone):
	// originalMessage cannot be null in the contract, so a redrive producer writes it empty and
	// adds this entry with the value "true". An event without the entry keeps the contract's
	// meaning (the value was the bytes of originalMessage).
	ValueNullEntry = "redrive-value-null"
	// InPlaceAttemptsEntry is the metadata map entry with the number of in-place attempts the
	// middleware made before it dead-lettered the record, as a decimal UTF-8 string.
	InPlaceAttemptsEntry = "redrive-inplace-attempts"
)

// Full names of the two records, used for TopicRecordNameStrategy subjects.
const (
	EventFullName = "ch.admin.bit.jeap.messaging.avro.errorevent.MessageProcessingFailedEvent"
	KeyFullName   = "ch.admin.bit.jeap.messaging.avro.errorevent.MessageProcessingFailedMessageKey"
)

// Event is a MessageProcessingFailedEvent. Field order follows the contract.
type Event struct {
	Identity           Identity
	Type               EventType
	Publisher          Publisher
	References         References
	Payload            Payload
	ProcessID          *string
	DomainEventVersion string
}

// Identity identifies one event. IdempotenceID makes intake idempotent.
type Identity struct {
	EventID       string
	IdempotenceID string
	// Created is a UTC time with millisecond precision.
	Created time.Time
}

// EventType names the event's type; for an MPFE Name is "MessageProcessingFailedEvent".
type EventType struct {
	Name    string
	Version string
	Variant *string
}

// Publisher names the system and service that failed to process the message.
type Publisher struct {
	System  string
	Service string
}

// References point at the failed message and classify the error.
type References struct {
	Message   MessageReference
	ErrorType ErrorTypeReference
}

// MessageReference locates the failed record. Partition and Offset travel as decimal strings.
type MessageReference struct {
	Type      string
	TopicName string
	Partition int32
	Offset    int64
}

// ErrorTypeReference classifies the failure.
type ErrorTypeReference struct {
	Type        string
	Temporality Temporality
	Code        string
}

// Payload carries the original record and the error.
type Payload struct {
	// OriginalMessage is the failed record's value, byte for byte.
	OriginalMessage []byte
	// OriginalKey is the failed record's key; nil is Avro null, a non-nil empty slice is empty bytes.
	OriginalKey           []byte
	ErrorMessage          string
	ErrorDescription      *string
	StackTrace            *string
	StackTraceHash        *string
	FailedMessageMetadata *Metadata
}

// Metadata describes the failed message where known.
type Metadata struct {
	EventID            *string
	IdempotenceID      *string
	Created            *time.Time
	System             *string
	Service            *string
	MessageTypeName    *string
	MessageTypeVersion *string
	// Headers is the wire map: one value per name, plus the HeadersEntry entry when a redrive
	// producer wrote it. Use SetHeaders and OriginalHeaders to work with the exact header list.
	Headers map[string][]byte
}

// Key is the Kafka key record of an MPFE.
type Key struct {
	Key string
}

// Header is one Kafka record header. A nil Value is a null header value.
type Header struct {
	Name  string
	Value []byte
}

// Validate checks the parts of e that the Avro schema cannot: the temporality.
func (e *Event) Validate() error {
	if !e.References.ErrorType.Temporality.Valid() {
		return &DecodeError{Check: CheckTemporality, Err: ErrBadTemporality,
			Detail: fmt.Sprintf("references.errorType.temporality is %q, want TEMPORARY, PERMANENT or UNKNOWN", string(e.References.ErrorType.Temporality))}
	}
	return nil
}

// Ptr returns a pointer to v; handy for the optional fields.
func Ptr[T any](v T) *T { return &v }
