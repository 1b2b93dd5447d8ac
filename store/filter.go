package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/avro"
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
	// GroupID keeps the failures of one group.
	GroupID int64
	// Key keeps failures whose original key is exactly these bytes; nil does not restrict.
	Key []byte
	// Search keeps failures whose error message contains this text, ignoring case.
	Search string
	// CreatedFrom keeps failures stored at or after it; CreatedTo those stored before it.
	CreatedFrom time.Time
	CreatedTo   time.Time
}

// IsZero reports whether f selects every failure.
func (f *Filter) IsZero() bool {
	return len(f.States) == 0 && len(f.Temporalities) == 0 && f.Topic == "" && f.PublisherSystem == "" &&
		f.PublisherService == "" && f.ErrorCode == "" && f.MessageType == "" && f.GroupID == 0 &&
		len(f.SourceFormats) == 0 && f.SourceTopic == "" &&
		f.Key == nil && f.Search == "" && f.CreatedFrom.IsZero() && f.CreatedTo.IsZero()
}

// Validate returns a *FilterError naming the first criterion that is not valid.
func (f *Filter) Validate() error {
	for _, s := range f.States {
		if !s.Valid() {
			return &FilterError{Field: "state", Detail: fmt.Sprintf("%q is not a state (RETRY_PENDING, PERMANENT, RESENT, CLOSED)", truncateForError(string(s)))}
		}
	}
	for _, t := range f.Temporalities {
		if !t.Valid() {
			return &FilterError{Field: "temporality", Detail: fmt.Sprintf("%q is not a temporality (TEMPORARY, PERMANENT, UNKNOWN)", truncateForError(string(t)))}
		}
	}
	for _, sf := range f.SourceFormats {
		if !sf.Valid() {
			return &FilterError{Field: "source_format", Detail: fmt.Sprintf("%q is not a source format (mpfe, spring, connect, streams, raw)", truncateForError(string(sf)))}
		}
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
	return nil
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

// truncateForError shortens a client-given value quoted in an error message.
func truncateForError(s string) string {
	if len(s) <= 40 {
		return s
	}
	cut := 40
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
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
	if f.GroupID != 0 {
		c = append(c, "f.group_id = "+args.add(f.GroupID))
	}
	if f.Key != nil {
		c = append(c, "f.original_key = "+args.add(f.Key))
	}
	if f.Search != "" {
		c = append(c, "f.error_message ILIKE "+args.add("%"+escapeLike(f.Search)+"%"))
	}
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
