package store

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redrive/redrive/avro"
)

// transferFields names, for each field of an event that validateIncoming checks, the field of
// the transfer format (the export's NDJSON) that holds it.
var transferFields = map[string]string{
	"source.format":                            "source.format",
	"source.topic":                             "source.topic",
	"identity.eventId":                         "event_id",
	"identity.idempotenceId":                   "idempotence_id",
	"identity.created":                         "event_created",
	"references.errorType.temporality":         "temporality",
	"publisher.system":                         "publisher_system",
	"publisher.service":                        "publisher_service",
	"references.message.topicName":             "topic",
	"references.errorType.code":                "error_code",
	"payload.errorMessage":                     "error_message",
	"payload.errorDescription":                 "error_description",
	"payload.stackTrace":                       "stack_trace",
	"payload.stackTraceHash":                   "stack_trace_hash",
	"processId":                                "process_id",
	"failedMessageMetadata.eventId":            "message.id",
	"failedMessageMetadata.idempotenceId":      "message.idempotence_id",
	"failedMessageMetadata.created":            "message.created",
	"failedMessageMetadata.system":             "message.system",
	"failedMessageMetadata.service":            "message.service",
	"failedMessageMetadata.messageTypeName":    "message.type",
	"failedMessageMetadata.messageTypeVersion": "message.type_version",
	"group key":                                "group key",
}

// ValidateTransfer returns a *BadDataError (Index -1, Field named as the transfer format names
// it, e.g. "topic" or "group.note") when r must not be stored as it is: the intake's own rules
// (ValidateIncoming: text that is UTF-8 without NUL, indexed texts within MaxKeyText, a group
// key within MaxGroupKey, times within years 1 to 9999), the same text rules for the fields
// the service and operators set (state reason, resend error, closing reason and principal, the
// group's kind), a payload within the intake's bound on an event (avro.DefaultMaxSize), and
// what the failures table requires of a row (a RETRY_PENDING failure has its next attempt, a
// CLOSED one its reason, a source position is whole or absent), and a cluster that is empty
// (DefaultCluster) or a valid cluster name (ValidateClusterName). The group's ticket and note
// are the operator core's to check (their limits are in characters).
func ValidateTransfer(r *TransferRecord) error {
	bad := func(field, format string, args ...any) error {
		return &BadDataError{Index: -1, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	x := &r.Failure
	e := transferEvent(x)
	headers := x.Headers
	if md := e.Payload.FailedMessageMetadata; (md == nil || md.EventID == nil || *md.EventID == "") && x.CausingMessage != "" {
		// The record names its causing message: the intake's rules check that one (as the last
		// origin header, the one the intake would take it from), not one derived anew.
		headers = append(slices.Clip(headers), avro.Header{Name: avro.HeaderOrigin, Value: []byte(x.CausingMessage)})
	}
	in := Incoming{Event: e, Headers: headers, ValueNull: x.ValueNull, Source: Source{Format: x.SourceFormat}}
	if x.SourceTopic != nil {
		in.Source.Topic = *x.SourceTopic
	}
	if _, err := validateIncoming(-1, in); err != nil {
		if bde, ok := err.(*BadDataError); ok {
			switch name, known := transferFields[bde.Field]; {
			case known:
				bde.Field = name
			case strings.HasPrefix(bde.Field, "causing message"):
				bde.Field = "causing_message"
			}
		}
		return err
	}
	texts := []struct {
		field string
		value *string
	}{
		{"causing_message", &x.CausingMessage},
		{"state_reason", r.StateReason},
		{"last_resend_error", x.LastResendError},
		{"closed_reason", x.ClosedReason},
		{"closed_by", x.ClosedBy},
		{"group.publisher_service", &r.Group.PublisherService},
		{"group.message_type", &r.Group.MessageType},
		{"group.error_code", &r.Group.ErrorCode},
		{"group.stack_trace_hash", &r.Group.StackTraceHash},
	}
	for _, t := range texts {
		if t.value != nil {
			if err := checkText(*t.value); err != "" {
				return bad(t.field, "%s", err)
			}
		}
	}
	if len(x.CausingMessage) > MaxKeyText {
		return bad("causing_message", "%d bytes, limit %d", len(x.CausingMessage), MaxKeyText)
	}
	g := r.Group
	if len(g.PublisherService) > MaxKeyText {
		return bad("group.publisher_service", "%d bytes, limit %d", len(g.PublisherService), MaxKeyText)
	}
	if n := len(g.PublisherService) + len(g.MessageType) + len(g.ErrorCode) + len(g.StackTraceHash); n > MaxGroupKey {
		return bad("group", "publisher_service, message_type, error_code and stack_trace_hash take %d bytes, limit %d", n, MaxGroupKey)
	}
	size := len(x.Key) + len(x.Value)
	for _, h := range x.Headers {
		size += len(h.Name) + len(h.Value)
	}
	if size > avro.DefaultMaxSize {
		return bad("value", "key, value and headers take %d bytes, more than an event the intake takes (%d)", size, avro.DefaultMaxSize)
	}
	for _, t := range []struct {
		field string
		value *time.Time
	}{
		{"next_attempt_at", x.NextAttemptAt}, {"resent_at", x.ResentAt}, {"closed_at", x.ClosedAt},
		{"created_at", &x.CreatedAt}, {"updated_at", &x.UpdatedAt},
	} {
		if t.value != nil && (t.value.Before(minTime) || t.value.After(maxTime)) {
			return bad(t.field, "%s is outside years 1 to 9999", t.value)
		}
	}
	if x.Cluster != "" {
		if err := ValidateClusterName(x.Cluster); err != nil {
			return bad("cluster", "%v", err)
		}
	}
	switch {
	case x.State == StateRetryPending && x.NextAttemptAt == nil:
		return bad("next_attempt_at", "required for a %s failure", StateRetryPending)
	case x.State == StateClosed && x.ClosedReason == nil:
		return bad("closed_reason", "required for a %s failure", StateClosed)
	case (x.SourceTopic == nil) != (x.SourcePartition == nil) || (x.SourceTopic == nil) != (x.SourceOffset == nil):
		return bad("source", "topic, partition and offset are given together or not at all")
	}
	return nil
}

// transferEvent returns the event fields of a stored failure as the intake received them.
func transferEvent(x *Failure) *avro.Event {
	e := &avro.Event{
		Identity:  avro.Identity{EventID: x.EventID, IdempotenceID: x.IdempotenceID, Created: x.EventCreated},
		Publisher: avro.Publisher{System: x.PublisherSystem, Service: x.PublisherService},
		References: avro.References{
			Message:   avro.MessageReference{TopicName: x.Topic, Partition: x.Partition, Offset: x.Offset},
			ErrorType: avro.ErrorTypeReference{Temporality: x.Temporality, Code: x.ErrorCode},
		},
		Payload: avro.Payload{OriginalMessage: x.Value, OriginalKey: x.Key, ErrorMessage: x.ErrorMessage,
			ErrorDescription: x.ErrorDescription, StackTrace: x.StackTrace, StackTraceHash: x.StackTraceHash},
		ProcessID: x.ProcessID,
	}
	if x.MessageID != nil || x.MessageIdempotenceID != nil || x.MessageCreated != nil || x.MessageSystem != nil ||
		x.MessageService != nil || x.MessageType != nil || x.MessageTypeVersion != nil {
		e.Payload.FailedMessageMetadata = &avro.Metadata{EventID: x.MessageID, IdempotenceID: x.MessageIdempotenceID,
			Created: x.MessageCreated, System: x.MessageSystem, Service: x.MessageService, MessageTypeName: x.MessageType,
			MessageTypeVersion: x.MessageTypeVersion}
	}
	return e
}
