package avro

import "time"

// FailedRecord is what a producer of MPFEs knows of one failed record: its identity as an
// event, its publisher, its position, its classification, its bytes and the error. Both
// producers of redrive (the consumer middleware and the service's own dead-letter path) build
// their events from it with [FillFailureEvent], so the events agree field by field.
type FailedRecord struct {
	// EventID and IdempotenceID are the event's identity.
	EventID, IdempotenceID string
	// Created is the event's creation time; it is written in UTC, cut to milliseconds.
	Created time.Time
	// System and Service name the publisher.
	System, Service string
	// Topic, Partition and Offset are the failed record's position.
	Topic     string
	Partition int32
	Offset    int64
	// Temporality and Code classify the failure.
	Temporality Temporality
	Code        string
	// Key and Value are the failed record's bytes, unchanged. A nil Value is written as empty
	// bytes (the contract's originalMessage is not nullable).
	Key, Value []byte
	// Tombstone marks a record whose value was null: the ValueNullEntry metadata entry is
	// added, so that a resend produces a tombstone again.
	Tombstone bool
	// ErrorMessage is the error's text; ErrorDescription, StackTrace and StackTraceHash are
	// optional.
	ErrorMessage                                 string
	ErrorDescription, StackTrace, StackTraceHash *string
	// Metadata is the failed message's metadata, written into the event as it is (not
	// copied); nil means none. A producer that writes the headers straight from the record
	// ([AppendEventHeaders] does so when Metadata.Headers is nil) must build the map itself
	// for a Tombstone, which needs an entry in it.
	Metadata *Metadata
}

// FillFailureEvent writes the MPFE of r to ev (type, version and references as the contract
// and jEAP write them).
func FillFailureEvent(ev *Event, r *FailedRecord) {
	value := r.Value
	if value == nil {
		value = []byte{}
	}
	meta := r.Metadata
	if r.Tombstone {
		if meta == nil {
			meta = &Metadata{}
		}
		if meta.Headers == nil {
			meta.Headers = map[string][]byte{}
		}
		meta.Headers[ValueNullEntry] = []byte("true")
	}
	*ev = Event{
		Identity:  Identity{EventID: r.EventID, IdempotenceID: r.IdempotenceID, Created: r.Created.UTC().Truncate(time.Millisecond)},
		Type:      EventType{Name: EventTypeName, Version: EventTypeVersion},
		Publisher: Publisher{System: r.System, Service: r.Service},
		References: References{
			Message:   MessageReference{Type: MessageReferenceType, TopicName: r.Topic, Partition: r.Partition, Offset: r.Offset},
			ErrorType: ErrorTypeReference{Type: ErrorTypeException, Temporality: r.Temporality, Code: r.Code},
		},
		Payload: Payload{
			OriginalMessage:       value,
			OriginalKey:           r.Key,
			ErrorMessage:          r.ErrorMessage,
			ErrorDescription:      r.ErrorDescription,
			StackTrace:            r.StackTrace,
			StackTraceHash:        r.StackTraceHash,
			FailedMessageMetadata: meta,
		},
		DomainEventVersion: DomainEventVersion,
	}
}

// NewFailureEvent returns the MPFE of r (see [FillFailureEvent]).
func NewFailureEvent(r *FailedRecord) *Event {
	ev := &Event{}
	FillFailureEvent(ev, r)
	return ev
}
