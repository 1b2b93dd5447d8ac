package api

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/operator"
)

// failureSummary is a failure in a list: no payload bytes.
type failureSummary struct {
	ID               uuid.UUID `json:"id"`
	State            string    `json:"state"`
	StateReason      *string   `json:"state_reason"`
	Temporality      string    `json:"temporality"`
	ErrorCode        string    `json:"error_code"`
	ErrorMessage     string    `json:"error_message"`
	PublisherSystem  string    `json:"publisher_system"`
	PublisherService string    `json:"publisher_service"`
	Topic            string    `json:"topic"`
	// Partition and Offset locate the original record; null when the source does not know
	// them (a raw dead-letter topic). Offset is a decimal string: Kafka offsets are 64-bit and
	// can pass 2^53, which clients that read JSON numbers as doubles (JavaScript, jq) would
	// round.
	Partition *int32  `json:"partition"`
	Offset    *string `json:"offset"`
	// ValueNull is true for a tombstone: the original value was null (value_size is 0).
	ValueNull bool `json:"value_null"`
	// SourceFormat is the format of the topic the failure was read from (mpfe, spring,
	// connect, streams, raw); SourceTopic that topic, null for failures stored before sources.
	SourceFormat string  `json:"source_format"`
	SourceTopic  *string `json:"source_topic"`
	// Cluster is the Kafka cluster the failure was read from, where its resends go.
	Cluster        string     `json:"cluster"`
	MessageType    *string    `json:"message_type"`
	CausingMessage string     `json:"causing_message"`
	Attempt        int        `json:"attempt"`
	GroupID        int64      `json:"group_id"`
	KeySize        *int       `json:"key_size"`
	ValueSize      int        `json:"value_size"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	ResentAt       *time.Time `json:"resent_at"`
	ClosedAt       *time.Time `json:"closed_at"`
	EventCreated   time.Time  `json:"event_created"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

func summaryJSON(s *redrive.FailureSummary) failureSummary {
	return failureSummary{
		ID: s.ID, State: string(s.State), StateReason: s.StateReason, Temporality: string(s.Temporality),
		ErrorCode: s.ErrorCode, ErrorMessage: s.ErrorMessage, PublisherSystem: s.PublisherSystem,
		PublisherService: s.PublisherService, Topic: s.Topic, Partition: position32(s.Partition), Offset: positionString(s.Offset),
		ValueNull: s.ValueNull, SourceFormat: string(s.SourceFormat), SourceTopic: s.SourceTopic, Cluster: s.Cluster,
		MessageType: s.MessageType, CausingMessage: s.CausingMessage, Attempt: s.Attempt, GroupID: s.GroupID,
		KeySize: s.KeySize, ValueSize: s.ValueSize, NextAttemptAt: s.NextAttemptAt, ResentAt: s.ResentAt,
		ClosedAt: s.ClosedAt, EventCreated: s.EventCreated, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
}

// position32 returns a partition, or nil when unknown.
func position32(p int32) *int32 {
	if p == redrive.UnknownPosition {
		return nil
	}
	return &p
}

// positionString returns an offset as a decimal string, or nil when unknown.
func positionString(o int64) *string {
	if o == redrive.UnknownPosition {
		return nil
	}
	s := strconv.FormatInt(o, 10)
	return &s
}

// page is a list response.
type page[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

// pageOf returns the page of items, each written by conv, whose next page is at the cursor
// next ("" on the last page).
func pageOf[S, T any](items []S, conv func(*S) T, next string) page[T] {
	p := page[T]{Data: listOf(items, conv)}
	if next != "" {
		p.NextCursor = &next
	}
	return p
}

// listOf returns items, each written by conv.
func listOf[S, T any](items []S, conv func(*S) T) []T {
	out := make([]T, len(items))
	for i := range items {
		out[i] = conv(&items[i])
	}
	return out
}

// seqCursor is the cursor of a list paged by a sequence number: "" for 0, the last page.
func seqCursor(next int64) string {
	if next == 0 {
		return ""
	}
	return strconv.FormatInt(next, 10)
}

// failurePage is a page of failures, with the total when asked for.
type failurePage struct {
	page[failureSummary]
	Total *totalJSON `json:"total,omitempty"`
	// Scan reports a decoded field search (payload_field): the candidates decoded, and
	// whether the scan stopped at its bound (next_cursor then continues it).
	Scan *scanJSON `json:"scan,omitempty"`
}

// scanJSON reports the scan of a decoded field search.
type scanJSON struct {
	Scanned   int  `json:"scanned"`
	Undecoded int  `json:"undecoded"`
	Limited   bool `json:"limited"`
}

// totalJSON counts what a filter selects: exact up to a cap; more says there are more.
type totalJSON struct {
	Count int64 `json:"count"`
	More  bool  `json:"more"`
}

// listParams are the query parameters of GET /failures besides the filter.
var listParams = []string{"sort", "limit", "cursor", "total"}

// listFailures serves GET /failures.
func (a *api) listFailures(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, operator.FilterParams, listParams)
	var req operator.ListRequest
	if err == nil {
		req.Filter, err = operator.ParseFilter(q)
	}
	if err == nil {
		req.Order, err = parseSort(q)
	}
	if err == nil {
		req.Limit, err = parseLimit(q)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	req.Cursor, req.Reader = q.Get("cursor"), reader(r)
	if s := q.Get("total"); s != "" {
		if req.Total, err = strconv.ParseBool(s); err != nil {
			a.fail(w, r, badRequest("total", "%q is not true or false", clip.Text(s, clip.Default)))
			return
		}
	}
	p, err := a.core.ListFailures(r.Context(), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	resp := failurePage{page: pageOf(p.Items, summaryJSON, p.Next)}
	if p.Total != nil {
		resp.Total = &totalJSON{Count: *p.Total, More: p.TotalMore}
	}
	if p.FieldScan != nil {
		resp.Scan = &scanJSON{Scanned: p.FieldScan.Scanned, Undecoded: p.FieldScan.Undecoded, Limited: p.FieldScan.Limited}
	}
	writeJSON(w, http.StatusOK, resp)
}

// bytesJSON shows stored bytes: base64 always, text when they are printable UTF-8. Without the
// payload permission only the size and the content type are shown (hidden).
type bytesJSON struct {
	// Size is the full length in bytes.
	Size int `json:"size"`
	// ContentType says what the bytes look like (application/json, text/plain,
	// application/vnd.apache.avro, application/octet-stream).
	ContentType string `json:"content_type,omitempty"`
	// Base64 holds the bytes (at most the inline limit); null when hidden.
	Base64 *string `json:"base64"`
	// Text holds the same bytes as text when they are printable UTF-8; null otherwise.
	Text *string `json:"text"`
	// Truncated is true when Base64 and Text hold only the first bytes.
	Truncated bool `json:"truncated"`
	// Hidden is true when the reader may not read payloads: only the size is shown.
	Hidden bool `json:"hidden,omitempty"`
}

func newBytesJSON(b []byte, limit int) *bytesJSON {
	if b == nil {
		return nil
	}
	out := &bytesJSON{Size: len(b)}
	if len(b) > limit {
		b, out.Truncated = b[:limit], true
	}
	enc := base64.StdEncoding.EncodeToString(b)
	out.Base64 = &enc
	out.Text = printable(b, out.Truncated)
	return out
}

// hiddenBytesJSON shows only the size and type of bytes the reader may not read; nil for
// size -1 (null).
func hiddenBytesJSON(size int, contentType string) *bytesJSON {
	if size < 0 {
		return nil
	}
	return &bytesJSON{Size: size, ContentType: contentType, Hidden: true}
}

// printable returns b as text when it is UTF-8 without control characters other than tab,
// newline and carriage return; cut says b may end inside a character.
func printable(b []byte, cut bool) *string {
	if cut {
		// Drop a partial rune at the end of a cut.
		for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
			if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
				break
			}
			b = b[:len(b)-1]
		}
	}
	if !utf8.Valid(b) {
		return nil
	}
	s := string(b)
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return nil
		}
	}
	return &s
}

// headerJSON is one original record header, in order.
type headerJSON struct {
	Name string `json:"name"`
	// Value is null for a null header value.
	Value *bytesJSON `json:"value"`
}

// messageJSON is the failed message's metadata, where known.
type messageJSON struct {
	ID            *string    `json:"id"`
	IdempotenceID *string    `json:"idempotence_id"`
	Created       *time.Time `json:"created"`
	System        *string    `json:"system"`
	Service       *string    `json:"service"`
	Type          *string    `json:"type"`
	TypeVersion   *string    `json:"type_version"`
}

// auditJSON is one audit log entry.
type auditJSON struct {
	ID        int64          `json:"id"`
	FailureID *uuid.UUID     `json:"failure_id"`
	GroupID   *int64         `json:"group_id"`
	Action    string         `json:"action"`
	Principal string         `json:"principal"`
	Reason    *string        `json:"reason"`
	Details   map[string]any `json:"details"`
	At        time.Time      `json:"at"`
}

func auditEntryJSON(e *redrive.AuditEntry) auditJSON {
	return auditJSON{ID: e.ID, FailureID: e.FailureID, GroupID: e.GroupID, Action: e.Action,
		Principal: e.Principal, Reason: e.Reason, Details: e.Details, At: e.At}
}

func auditListJSON(in []redrive.AuditEntry) []auditJSON { return listOf(in, auditEntryJSON) }

// failureDetail is everything stored about a failure.
type failureDetail struct {
	failureSummary
	ErrorDescription *string          `json:"error_description"`
	StackTrace       *string          `json:"stack_trace"`
	StackTraceHash   *string          `json:"stack_trace_hash"`
	EventID          string           `json:"event_id"`
	IdempotenceID    string           `json:"idempotence_id"`
	ProcessID        *string          `json:"process_id"`
	Message          messageJSON      `json:"message"`
	Key              *bytesJSON       `json:"key"`
	Value            *bytesJSON       `json:"value"`
	Headers          []headerJSON     `json:"headers"`
	ResendFailures   int              `json:"resend_failures"`
	LastResendError  *string          `json:"last_resend_error"`
	LeaseOwner       *string          `json:"lease_owner"`
	LeaseUntil       *time.Time       `json:"lease_until"`
	ClosedReason     *string          `json:"closed_reason"`
	ClosedBy         *string          `json:"closed_by"`
	Attempts         []failureSummary `json:"attempts"`
	Audit            []auditJSON      `json:"audit"`
	// ParkedChain is the failure's ordering-guard chain; null when it is in none.
	ParkedChain *parkedChainJSON `json:"parked_chain"`
	// SourcePartition and SourceOffset locate the record on the topic it was read from.
	SourcePartition *int32  `json:"source_partition"`
	SourceOffset    *string `json:"source_offset"`
	// PayloadHidden says why key, value and header values are not shown; null when they are.
	PayloadHidden *string `json:"payload_hidden"`
	// Masked is true when masking rules changed the value or header values shown.
	Masked bool `json:"masked"`
}

// getFailure serves GET /failures/{id}.
func (a *api) getFailure(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idOnly(w, r)
	if !ok {
		return
	}
	d, err := a.core.Failure(r.Context(), id, reader(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	f := &d.Failure
	limit := a.cfg.InlinePayloadBytes
	var keySize *int
	if f.Key != nil {
		n := len(f.Key)
		keySize = &n
	}
	out := failureDetail{
		failureSummary: summaryJSON(&redrive.FailureSummary{
			ID: f.ID, State: f.State, StateReason: d.StateReason, Temporality: f.Temporality, ErrorCode: f.ErrorCode,
			ErrorMessage: f.ErrorMessage, PublisherSystem: f.PublisherSystem, PublisherService: f.PublisherService,
			Topic: f.Topic, Partition: f.Partition, Offset: f.Offset, MessageType: f.MessageType,
			CausingMessage: f.CausingMessage, Attempt: f.Attempt, GroupID: f.GroupID, KeySize: keySize,
			ValueSize: len(f.Value), NextAttemptAt: f.NextAttemptAt, ResentAt: f.ResentAt, ClosedAt: f.ClosedAt,
			EventCreated: f.EventCreated, CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt,
			ValueNull: f.ValueNull, SourceFormat: f.SourceFormat, SourceTopic: f.SourceTopic, Cluster: f.Cluster,
		}),
		SourcePartition: f.SourcePartition, SourceOffset: optionalString64(f.SourceOffset),
		ErrorDescription: f.ErrorDescription, StackTrace: f.StackTrace, StackTraceHash: f.StackTraceHash,
		EventID: f.EventID, IdempotenceID: f.IdempotenceID, ProcessID: f.ProcessID,
		Message: messageJSON{ID: f.MessageID, IdempotenceID: f.MessageIdempotenceID, Created: f.MessageCreated,
			System: f.MessageSystem, Service: f.MessageService, Type: f.MessageType, TypeVersion: f.MessageTypeVersion},
		Key:             newBytesJSON(f.Key, limit),
		Value:           newBytesJSON(f.Value, limit),
		Headers:         make([]headerJSON, len(f.Headers)),
		ResendFailures:  f.ResendFailures,
		LastResendError: f.LastResendError,
		LeaseOwner:      d.LeaseOwner,
		LeaseUntil:      d.LeaseUntil,
		ClosedReason:    f.ClosedReason,
		ClosedBy:        f.ClosedBy,
		Attempts:        listOf(d.Chain, summaryJSON),
		Audit:           auditListJSON(d.Audit),
		ParkedChain:     newParkedChainJSON(d.Parked),
	}
	for i, h := range f.Headers {
		out.Headers[i] = headerJSON{Name: h.Name, Value: newBytesJSON(h.Value, limit)}
	}
	if out.Key != nil {
		out.Key.ContentType = d.KeyType
	}
	if out.Value != nil {
		out.Value.ContentType = d.ValueType
	}
	if d.PayloadHidden != "" {
		out.PayloadHidden = &d.PayloadHidden
		out.Key, out.Value = hiddenBytesJSON(d.KeySize, d.KeyType), hiddenBytesJSON(d.ValueSize, d.ValueType)
		for i := range out.Headers {
			out.Headers[i].Value = hiddenBytesJSON(d.HeaderSizes[i], "")
		}
	}
	out.Masked = d.Masked
	writeJSON(w, http.StatusOK, out)
}

// optionalString64 returns an optional int64 as a decimal string.
func optionalString64(o *int64) *string {
	if o == nil {
		return nil
	}
	s := strconv.FormatInt(*o, 10)
	return &s
}
