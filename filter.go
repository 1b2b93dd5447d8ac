package redrive

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/avro"
)

// MaxSearchLen bounds Filter.Search in characters.
const MaxSearchLen = 200

// MaxFilterText bounds the exact-match text criteria of a Filter in bytes.
const MaxFilterText = 1000

// maxFilterKey bounds Filter.Key in bytes.
const maxFilterKey = 64 << 10

// Filter selects failures. A zero field does not restrict; the criteria combine with AND, and
// the values of a list criterion with OR.
type Filter struct {
	// States keeps failures in any of these states.
	States []State
	// Temporalities keeps failures of any of these temporalities.
	Temporalities []avro.Temporality
	// Topic is the original topic, exactly.
	Topic string
	// PublisherSystem and PublisherService name the system and service that failed, exactly.
	PublisherSystem  string
	PublisherService string
	// ErrorCode is the error code, exactly.
	ErrorCode string
	// MessageType is the failed message's type name from its metadata, exactly.
	MessageType string
	// SourceFormats keeps failures read from a source of any of these formats.
	SourceFormats []SourceFormat
	// SourceTopic is the topic the failure was read from (error topic or dead-letter topic),
	// exactly.
	SourceTopic string
	// Clusters keeps failures read from any of these Kafka clusters (ValidateClusterName).
	Clusters []string
	// GroupID keeps the failures of one group.
	GroupID int64
	// Key keeps failures whose original key is exactly these bytes; nil does not restrict.
	Key []byte
	// Search keeps failures whose error message contains this text, ignoring case.
	Search string
	// CreatedFrom keeps failures stored at or after it; CreatedTo those stored before it.
	CreatedFrom time.Time
	CreatedTo   time.Time

	// KeyPrefix keeps failures whose original key starts with these bytes (at most
	// MaxKeyPrefix); nil does not restrict.
	KeyPrefix []byte
	// EventID and IdempotenceID are the MPFE's identity, exactly.
	EventID       string
	IdempotenceID string
	// CausingMessage is the causing message's identity (the failed message's eventId where it
	// had one), exactly: every attempt of one message.
	CausingMessage string
	// TraceID is the W3C trace id (32 hex digits) of the traceparent among the original
	// headers.
	TraceID string
	// HeaderName keeps failures whose original headers include this name; with HeaderValue,
	// one of that name with exactly this value.
	HeaderName  string
	HeaderValue []byte
	// StackTraceHash is the stack-trace hash (the group's), exactly.
	StackTraceHash string
	// Ticket keeps failures whose group has this ticket; NoTicket those whose group has none.
	Ticket   string
	NoTicket bool
	// Payload keeps failures whose original value contains these bytes (MinPayloadSearch to
	// MaxPayloadSearch bytes). It reads the values themselves: it needs a time range of at most
	// MaxPayloadSpan or an indexed criterion (see PayloadBounded), and a list with it runs
	// under PayloadTimeout.
	Payload []byte
	// PayloadField keeps failures whose value, decoded with its writer schema (Avro, Protobuf,
	// JSON Schema or plain JSON, as the payload views decode it) and masked by the rules of its
	// topic, has a field at this JSON pointer (ParsePayloadPointer); with PayloadFieldValue,
	// one whose value is exactly that text, with PayloadFieldContains one whose value contains
	// it (PayloadFieldMatch). Decoding needs the schema registry of the failure's cluster, so
	// the operator core matches it, not the store (which refuses a filter holding it): like
	// Payload, it needs PayloadBounded, and a request reads a bounded number of candidates.
	PayloadField         string
	PayloadFieldValue    string
	PayloadFieldContains string
}

// Bounds of the search criteria.
const (
	MaxKeyPrefix     = 256
	MinPayloadSearch = 3
	MaxPayloadSearch = 200
	MaxPayloadSpan   = 31 * 24 * time.Hour
	PayloadTimeout   = 5 * time.Second
)

// PayloadBounded reports whether f restricts the rows a payload search reads: a time range of
// at most MaxPayloadSpan, or a criterion that an index serves.
func (f *Filter) PayloadBounded() bool {
	if !f.CreatedFrom.IsZero() && !f.CreatedTo.IsZero() && f.CreatedTo.Sub(f.CreatedFrom) <= MaxPayloadSpan {
		return true
	}
	return f.Topic != "" || f.GroupID != 0 || f.Key != nil || f.KeyPrefix != nil || f.EventID != "" ||
		f.IdempotenceID != "" || f.CausingMessage != "" || f.TraceID != "" || f.StackTraceHash != ""
}

// IsZero reports whether f selects every failure.
func (f *Filter) IsZero() bool {
	return len(f.States) == 0 && len(f.Temporalities) == 0 && f.Topic == "" && f.PublisherSystem == "" &&
		f.PublisherService == "" && f.ErrorCode == "" && f.MessageType == "" && f.GroupID == 0 &&
		len(f.SourceFormats) == 0 && f.SourceTopic == "" && len(f.Clusters) == 0 &&
		f.Key == nil && f.Search == "" && f.CreatedFrom.IsZero() && f.CreatedTo.IsZero() &&
		f.KeyPrefix == nil && f.EventID == "" && f.IdempotenceID == "" && f.CausingMessage == "" && f.TraceID == "" &&
		f.HeaderName == "" && f.HeaderValue == nil && f.StackTraceHash == "" && f.Ticket == "" && !f.NoTicket && f.Payload == nil &&
		f.PayloadField == "" && f.PayloadFieldValue == "" && f.PayloadFieldContains == ""
}

// Validate returns a *FilterError naming the first criterion that is not valid.
func (f *Filter) Validate() error {
	for _, s := range f.States {
		if !s.Valid() {
			return &FilterError{Field: "state", Detail: fmt.Sprintf("%q is not a state (RETRY_PENDING, PERMANENT, RESENT, CLOSED)", clipText(string(s)))}
		}
	}
	for _, t := range f.Temporalities {
		if !t.Valid() {
			return &FilterError{Field: "temporality", Detail: fmt.Sprintf("%q is not a temporality (TEMPORARY, PERMANENT, UNKNOWN)", clipText(string(t)))}
		}
	}
	for _, sf := range f.SourceFormats {
		if !sf.Valid() {
			return &FilterError{Field: "source_format", Detail: fmt.Sprintf("%q is not a source format (mpfe, spring, connect, streams, raw)", clipText(string(sf)))}
		}
	}
	if err := f.validateClusters(); err != nil {
		return err
	}
	for _, c := range []struct{ field, value string }{
		{"topic", f.Topic}, {"source_topic", f.SourceTopic}, {"publisher_system", f.PublisherSystem}, {"publisher_service", f.PublisherService},
		{"error_code", f.ErrorCode}, {"message_type", f.MessageType},
	} {
		if err := CheckFilterText(c.field, c.value, MaxFilterText); err != nil {
			return err
		}
	}
	if err := CheckFilterText("q", f.Search, 4*MaxSearchLen); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(f.Search); n > MaxSearchLen {
		return &FilterError{Field: "q", Detail: fmt.Sprintf("%d characters, at most %d", n, MaxSearchLen)}
	}
	if f.GroupID < 0 {
		return &FilterError{Field: "group_id", Detail: "must be a positive integer"}
	}
	if len(f.Key) > maxFilterKey {
		return &FilterError{Field: "key", Detail: fmt.Sprintf("%d bytes, at most %d", len(f.Key), maxFilterKey)}
	}
	if !f.CreatedFrom.IsZero() && !f.CreatedTo.IsZero() && !f.CreatedFrom.Before(f.CreatedTo) {
		return &FilterError{Field: "created_to", Detail: "must be after created_from"}
	}
	return f.validateSearch()
}

// validateSearch checks the search criteria.
func (f *Filter) validateSearch() error {
	for _, c := range []struct{ field, value string }{
		{"event_id", f.EventID}, {"idempotence_id", f.IdempotenceID}, {"causing_event_id", f.CausingMessage},
		{"header", f.HeaderName}, {"stack_trace_hash", f.StackTraceHash}, {"ticket", f.Ticket},
	} {
		if err := CheckFilterText(c.field, c.value, MaxFilterText); err != nil {
			return err
		}
	}
	switch {
	case len(f.KeyPrefix) > MaxKeyPrefix:
		return &FilterError{Field: "key_prefix", Detail: fmt.Sprintf("%d bytes, at most %d", len(f.KeyPrefix), MaxKeyPrefix)}
	case f.KeyPrefix != nil && len(f.KeyPrefix) == 0:
		return &FilterError{Field: "key_prefix", Detail: "empty: a prefix needs at least one byte"}
	case f.TraceID != "" && !isTraceID(f.TraceID):
		return &FilterError{Field: "trace_id", Detail: fmt.Sprintf("%q is not a W3C trace id (32 lowercase hex digits, not all zero)", clipText(f.TraceID))}
	case f.HeaderValue != nil && f.HeaderName == "":
		return &FilterError{Field: "header", Detail: "a header value needs a header name (name=value)"}
	case len(f.HeaderValue) > MaxFilterText:
		return &FilterError{Field: "header", Detail: fmt.Sprintf("the value has %d bytes, at most %d", len(f.HeaderValue), MaxFilterText)}
	case f.Ticket != "" && f.NoTicket:
		return &FilterError{Field: "no_ticket", Detail: "give ticket or no_ticket, not both"}
	case f.Payload != nil && (len(f.Payload) < MinPayloadSearch || len(f.Payload) > MaxPayloadSearch):
		return &FilterError{Field: "payload", Detail: fmt.Sprintf("%d bytes, give %d to %d", len(f.Payload), MinPayloadSearch, MaxPayloadSearch)}
	case f.Payload != nil && !f.PayloadBounded():
		return &FilterError{Field: "payload", Detail: fmt.Sprintf("a payload search reads the payloads themselves: bound it with created_from and created_to at most %d days apart, or with topic, group_id, a key, an id, trace_id or stack_trace_hash", int(MaxPayloadSpan.Hours()/24))}
	}
	return f.validatePayloadField()
}

// validatePayloadField checks the decoded field search.
func (f *Filter) validatePayloadField() error {
	for _, c := range []struct{ field, value string }{
		{"payload_field_value", f.PayloadFieldValue}, {"payload_field_contains", f.PayloadFieldContains},
	} {
		if err := CheckFilterText(c.field, c.value, MaxPayloadSearch); err != nil {
			return err
		}
		if c.value != "" && f.PayloadField == "" {
			return &FilterError{Field: c.field, Detail: "needs payload_field, the JSON pointer of the field to compare (such as /customer/email)"}
		}
	}
	if f.PayloadField == "" {
		return nil
	}
	if _, err := ParsePayloadPointer(f.PayloadField); err != nil {
		return &FilterError{Field: "payload_field", Detail: err.Error()}
	}
	switch {
	case f.PayloadFieldValue != "" && f.PayloadFieldContains != "":
		return &FilterError{Field: "payload_field_contains", Detail: "give payload_field_value or payload_field_contains, not both"}
	case !f.PayloadBounded():
		return &FilterError{Field: "payload_field", Detail: fmt.Sprintf("a decoded field search decodes the payloads themselves: bound it with created_from and created_to at most %d days apart, or with topic, group_id, a key, an id, trace_id or stack_trace_hash", int(MaxPayloadSpan.Hours()/24))}
	}
	return nil
}

// SQLPart returns f without its decoded field search (PayloadField and its value terms): the
// criteria a store answers.
func (f *Filter) SQLPart() Filter {
	out := *f
	out.PayloadField, out.PayloadFieldValue, out.PayloadFieldContains = "", "", ""
	return out
}

// isTraceID reports whether s is a W3C trace id: 32 lowercase hex digits, not all zero.
func isTraceID(s string) bool {
	if len(s) != 32 || s == strings.Repeat("0", 32) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CheckFilterText returns a *FilterError on field when v is longer than limit bytes, not
// valid UTF-8, or holds a NUL character.
func CheckFilterText(field, v string, limit int) error {
	switch {
	case len(v) > limit:
		return &FilterError{Field: field, Detail: fmt.Sprintf("%d bytes, at most %d", len(v), limit)}
	case !utf8.ValidString(v):
		return &FilterError{Field: field, Detail: "not valid UTF-8"}
	case strings.IndexByte(v, 0) >= 0:
		return &FilterError{Field: field, Detail: "contains a NUL character"}
	}
	return nil
}

// clipDefault is the length, in bytes, that error messages clip client-given values to.
const clipDefault = 40

// clipText returns s when it is at most clipDefault bytes long, else its longest prefix of at
// most clipDefault bytes that ends on a rune boundary, followed by "…", so that an error
// message stays short whatever the client sent. Quote the result with %q.
func clipText(s string) string {
	if len(s) <= clipDefault {
		return s
	}
	cut := clipDefault
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
