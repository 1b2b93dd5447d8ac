package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/clip"
)

// MaxSearchLen bounds Filter.Search in characters.
const MaxSearchLen = 200

// maxFilterText bounds the exact-match text criteria of a Filter in bytes.
const maxFilterText = 1000

// maxFilterKey bounds Filter.Key in bytes.
const maxFilterKey = 64 << 10

// ErrBadFilter means a Filter is not valid; a *FilterError wraps it.
var ErrBadFilter = errors.New("bad filter")

// FilterError names the criterion of a Filter that is not valid. It wraps ErrBadFilter.
type FilterError struct {
	// Field is the criterion's name as the API spells it (snake_case).
	Field string
	// Detail says what is wrong with it.
	Detail string
}

// Error names the criterion and the problem.
func (e *FilterError) Error() string { return e.Field + ": " + e.Detail }

// Unwrap returns ErrBadFilter.
func (e *FilterError) Unwrap() error { return ErrBadFilter }

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
}

// Bounds of the search criteria.
const (
	MaxKeyPrefix     = 256
	MinPayloadSearch = 3
	MaxPayloadSearch = 200
	MaxPayloadSpan   = 31 * 24 * time.Hour
	PayloadTimeout   = 5 * time.Second
)

// ErrTooBroad means a search reads too many rows: it ran out of time or is not bounded; a
// *FilterError on "payload" wraps it.
var ErrTooBroad = errors.New("search too broad")

// PayloadBounded reports whether f restricts the rows a payload search reads: a time range of
// at most MaxPayloadSpan, or a criterion that an index serves.
func (f *Filter) PayloadBounded() bool {
	if !f.CreatedFrom.IsZero() && !f.CreatedTo.IsZero() && f.CreatedTo.Sub(f.CreatedFrom) <= MaxPayloadSpan {
		return true
	}
	return f.Topic != "" || f.GroupID != 0 || f.Key != nil || f.KeyPrefix != nil || f.EventID != "" ||
		f.IdempotenceID != "" || f.CausingMessage != "" || f.TraceID != "" || f.StackTraceHash != ""
}

// genericPlan reports whether f has only criteria whose plan does not depend on their values
// (states, temporalities, topics, services, codes, types, sources, group, time range), so
// that a list may run the statement's generic plan (Store.searchQuery).
func (f *Filter) genericPlan() bool {
	return f.Key == nil && f.Search == "" && f.KeyPrefix == nil && f.EventID == "" && f.IdempotenceID == "" &&
		f.CausingMessage == "" && f.TraceID == "" && f.HeaderName == "" && f.HeaderValue == nil &&
		f.StackTraceHash == "" && f.Ticket == "" && !f.NoTicket && f.Payload == nil
}

// countSource is the relation a count of the failures that f selects reads: failure_states
// alone when every criterion of f is a column of the states (state, temporality, topic, group,
// ticket, time range), else the failures view, which joins each state with its record.
func (f *Filter) countSource() string {
	if f.PublisherSystem == "" && f.PublisherService == "" && f.ErrorCode == "" && f.MessageType == "" &&
		len(f.SourceFormats) == 0 && f.SourceTopic == "" && len(f.Clusters) == 0 && f.Key == nil && f.Search == "" && f.KeyPrefix == nil &&
		f.EventID == "" && f.IdempotenceID == "" && f.CausingMessage == "" && f.TraceID == "" && f.HeaderName == "" &&
		f.HeaderValue == nil && f.StackTraceHash == "" && f.Payload == nil {
		return "failure_states"
	}
	return "failures"
}

// IsZero reports whether f selects every failure.
func (f *Filter) IsZero() bool {
	return len(f.States) == 0 && len(f.Temporalities) == 0 && f.Topic == "" && f.PublisherSystem == "" &&
		f.PublisherService == "" && f.ErrorCode == "" && f.MessageType == "" && f.GroupID == 0 &&
		len(f.SourceFormats) == 0 && f.SourceTopic == "" && len(f.Clusters) == 0 &&
		f.Key == nil && f.Search == "" && f.CreatedFrom.IsZero() && f.CreatedTo.IsZero() &&
		f.KeyPrefix == nil && f.EventID == "" && f.IdempotenceID == "" && f.CausingMessage == "" && f.TraceID == "" &&
		f.HeaderName == "" && f.HeaderValue == nil && f.StackTraceHash == "" && f.Ticket == "" && !f.NoTicket && f.Payload == nil
}

// Validate returns a *FilterError naming the first criterion that is not valid.
func (f *Filter) Validate() error {
	for _, s := range f.States {
		if !s.Valid() {
			return &FilterError{Field: "state", Detail: fmt.Sprintf("%q is not a state (RETRY_PENDING, PERMANENT, RESENT, CLOSED)", clip.Text(string(s), clip.Default))}
		}
	}
	for _, t := range f.Temporalities {
		if !t.Valid() {
			return &FilterError{Field: "temporality", Detail: fmt.Sprintf("%q is not a temporality (TEMPORARY, PERMANENT, UNKNOWN)", clip.Text(string(t), clip.Default))}
		}
	}
	for _, sf := range f.SourceFormats {
		if !sf.Valid() {
			return &FilterError{Field: "source_format", Detail: fmt.Sprintf("%q is not a source format (mpfe, spring, connect, streams, raw)", clip.Text(string(sf), clip.Default))}
		}
	}
	if err := f.validateClusters(); err != nil {
		return err
	}
	for _, c := range []struct{ field, value string }{
		{"topic", f.Topic}, {"source_topic", f.SourceTopic}, {"publisher_system", f.PublisherSystem}, {"publisher_service", f.PublisherService},
		{"error_code", f.ErrorCode}, {"message_type", f.MessageType},
	} {
		if err := checkFilterText(c.field, c.value, maxFilterText); err != nil {
			return err
		}
	}
	if err := checkFilterText("q", f.Search, 4*MaxSearchLen); err != nil {
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
		if err := checkFilterText(c.field, c.value, maxFilterText); err != nil {
			return err
		}
	}
	switch {
	case len(f.KeyPrefix) > MaxKeyPrefix:
		return &FilterError{Field: "key_prefix", Detail: fmt.Sprintf("%d bytes, at most %d", len(f.KeyPrefix), MaxKeyPrefix)}
	case f.KeyPrefix != nil && len(f.KeyPrefix) == 0:
		return &FilterError{Field: "key_prefix", Detail: "empty: a prefix needs at least one byte"}
	case f.TraceID != "" && !isTraceID(f.TraceID):
		return &FilterError{Field: "trace_id", Detail: fmt.Sprintf("%q is not a W3C trace id (32 lowercase hex digits, not all zero)", clip.Text(f.TraceID, clip.Default))}
	case f.HeaderValue != nil && f.HeaderName == "":
		return &FilterError{Field: "header", Detail: "a header value needs a header name (name=value)"}
	case len(f.HeaderValue) > maxFilterText:
		return &FilterError{Field: "header", Detail: fmt.Sprintf("the value has %d bytes, at most %d", len(f.HeaderValue), maxFilterText)}
	case f.Ticket != "" && f.NoTicket:
		return &FilterError{Field: "no_ticket", Detail: "give ticket or no_ticket, not both"}
	case f.Payload != nil && (len(f.Payload) < MinPayloadSearch || len(f.Payload) > MaxPayloadSearch):
		return &FilterError{Field: "payload", Detail: fmt.Sprintf("%d bytes, give %d to %d", len(f.Payload), MinPayloadSearch, MaxPayloadSearch)}
	case f.Payload != nil && !f.PayloadBounded():
		return &FilterError{Field: "payload", Detail: fmt.Sprintf("a payload search reads the payloads themselves: bound it with created_from and created_to at most %d days apart, or with topic, group_id, a key, an id, trace_id or stack_trace_hash", int(MaxPayloadSpan.Hours()/24))}
	}
	return nil
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

func checkFilterText(field, v string, limit int) error {
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

// sqlArgs collects the positional arguments of a statement being built.
type sqlArgs []any

// add appends v and returns its placeholder.
func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// conditions returns the SQL conditions of f on the failures table (aliased f), appending
// their arguments to args.
func (f *Filter) conditions(args *sqlArgs) []string {
	var c []string
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, s := range f.States {
			states[i] = string(s)
		}
		if len(states) == 1 {
			c = append(c, "f.state = "+args.add(states[0]))
		} else {
			c = append(c, "f.state = ANY("+args.add(states)+"::text[])")
		}
	}
	if len(f.Temporalities) > 0 {
		ts := make([]string, len(f.Temporalities))
		for i, t := range f.Temporalities {
			ts[i] = string(t)
		}
		c = append(c, "f.temporality = ANY("+args.add(ts)+"::text[])")
	}
	for _, eq := range []struct{ column, value string }{
		{"f.original_topic", f.Topic}, {"f.publisher_system", f.PublisherSystem},
		{"f.publisher_service", f.PublisherService}, {"f.error_code", f.ErrorCode}, {"f.message_type", f.MessageType},
		{"f.source_topic", f.SourceTopic},
	} {
		if eq.value != "" {
			c = append(c, eq.column+" = "+args.add(eq.value))
		}
	}
	if len(f.SourceFormats) > 0 {
		fs := make([]string, len(f.SourceFormats))
		for i, sf := range f.SourceFormats {
			fs[i] = string(sf)
		}
		c = append(c, "f.source_format = ANY("+args.add(fs)+"::text[])")
	}
	if len(f.Clusters) > 0 {
		c = append(c, "f.cluster = ANY("+args.add(f.Clusters)+"::text[])")
	}
	if f.GroupID != 0 {
		c = append(c, "f.group_id = "+args.add(f.GroupID))
	}
	if f.Key != nil {
		// The key prefix index (keyPrefixExpr) finds the rows; the second condition is exact.
		k := args.add(f.Key)
		c = append(c, keyPrefixExpr+" = substring("+k+"::bytea from 1 for 256)", "f.original_key = "+k+"::bytea")
	}
	if f.Search != "" {
		c = append(c, "f.error_message ILIKE "+args.add("%"+escapeLike(f.Search)+"%"))
	}
	c = append(c, f.searchConditions(args)...)
	if !f.CreatedFrom.IsZero() {
		c = append(c, "f.created_at >= "+args.add(f.CreatedFrom))
	}
	if !f.CreatedTo.IsZero() {
		c = append(c, "f.created_at < "+args.add(f.CreatedTo))
	}
	return c
}

// escapeLike escapes the LIKE wildcards of s (backslash is the default escape character).
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// whereClause joins conditions into a WHERE clause, or returns "" when there are none.
func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// searchConditions returns the SQL conditions of the search criteria of f.
func (f *Filter) searchConditions(args *sqlArgs) []string {
	var c []string
	for _, eq := range []struct{ column, value string }{
		{"f.event_id", f.EventID}, {"f.causing_message", f.CausingMessage}, {"f.stack_trace_hash", f.StackTraceHash},
	} {
		if eq.value != "" {
			c = append(c, eq.column+" = "+args.add(eq.value))
		}
	}
	if f.IdempotenceID != "" {
		// The idempotence ids are indexed once, across partitions, in failure_keys.
		c = append(c, "f.id = (SELECT k.failure_id FROM failure_keys k WHERE k.idempotence_id = "+args.add(f.IdempotenceID)+")")
	}
	if f.KeyPrefix != nil {
		// The expression index keyPrefixExpr serves the range; the second condition is exact
		// for the prefix's own length.
		p := args.add(f.KeyPrefix)
		c = append(c, keyPrefixExpr+" >= "+p+"::bytea",
			"substring(f.original_key from 1 for "+args.add(len(f.KeyPrefix))+") = "+p+"::bytea")
		if next, ok := prefixSuccessor(f.KeyPrefix); ok {
			c = append(c, keyPrefixExpr+" < "+args.add(next)+"::bytea")
		}
	}
	if f.TraceID != "" {
		c = append(c, "redrive_trace_id(f.header_names, f.header_values) = "+args.add(f.TraceID))
	}
	if f.HeaderName != "" {
		name := args.add(f.HeaderName)
		if f.HeaderValue == nil {
			c = append(c, "f.header_names @> ARRAY["+name+"::text]")
		} else {
			c = append(c, "f.header_names @> ARRAY["+name+"::text]",
				"EXISTS (SELECT 1 FROM unnest(f.header_names, f.header_values) AS h(n, v) WHERE h.n = "+name+" AND h.v = "+args.add(f.HeaderValue)+"::bytea)")
		}
	}
	if f.Ticket != "" {
		c = append(c, "f.group_id IN (SELECT g.id FROM failure_groups g WHERE g.ticket = "+args.add(f.Ticket)+")")
	}
	if f.NoTicket {
		c = append(c, "f.group_id IN (SELECT g.id FROM failure_groups g WHERE g.ticket IS NULL)")
	}
	if f.Payload != nil {
		c = append(c, "position("+args.add(f.Payload)+"::bytea in f.original_value) > 0")
	}
	return c
}

// keyPrefixExpr is the indexed expression of key prefix searches (migration 009): the first
// MaxKeyPrefix bytes of the key, short enough for a btree entry whatever the key's length.
const keyPrefixExpr = "substring(f.original_key from 1 for 256)"

// prefixSuccessor returns the smallest byte string greater than every string that starts with
// p, and false when there is none (p is all 0xff).
func prefixSuccessor(p []byte) ([]byte, bool) {
	next := append([]byte(nil), p...)
	for i := len(next) - 1; i >= 0; i-- {
		if next[i] < 0xff {
			next[i]++
			return next[:i+1], true
		}
	}
	return nil, false
}
