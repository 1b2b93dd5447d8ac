package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

var intakeNow = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// intakeNext is a deterministic backoff: attempt n is due n minutes from now, up to 3 attempts.
func intakeNext(attempt int, now time.Time) (time.Time, bool) {
	if attempt >= 3 {
		return time.Time{}, false
	}
	return now.Add(time.Duration(attempt) * time.Minute), true
}

func newIntakeStore(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool, Now: func() time.Time { return intakeNow }})
	if err != nil {
		t.Fatal(err)
	}
	return s, pool
}

// intakeEvent returns a valid event with the given idempotenceId.
func intakeEvent(idem string, temporality avro.Temporality) *avro.Event {
	return &avro.Event{
		Identity:  avro.Identity{EventID: uuid.NewString(), IdempotenceID: idem, Created: time.UnixMilli(1780000000123).UTC()},
		Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		Publisher: avro.Publisher{System: "shop", Service: "billing"},
		References: avro.References{
			Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: "orders", Partition: 1, Offset: 42},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: temporality, Code: "BOOM"},
		},
		Payload:            avro.Payload{OriginalMessage: []byte("value"), ErrorMessage: "boom"},
		DomainEventVersion: avro.DomainEventVersion,
	}
}

func incoming(t *testing.T, e *avro.Event) store.Incoming {
	t.Helper()
	hs, err := e.Payload.FailedMessageMetadata.OriginalHeaders()
	if err != nil {
		t.Fatal(err)
	}
	return store.Incoming{Event: e, Headers: hs}
}

func ingest(t *testing.T, s *store.Store, batch ...store.Incoming) store.IngestResult {
	t.Helper()
	res, err := s.Ingest(context.Background(), batch, intakeNext)
	if err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	if len(res.Outcomes) != len(batch) {
		t.Fatalf("Ingest returned %d outcomes for %d events", len(res.Outcomes), len(batch))
	}
	return res
}

// storedRow is a failures row as the intake wrote it.
type storedRow struct {
	ID                                                  uuid.UUID
	State, Temporality, ErrorCode, ErrorMessage         string
	ErrorDescription, StackTrace, StackTraceHash        *string
	EventID, IdempotenceID                              string
	EventCreated                                        time.Time
	PublisherSystem, PublisherService                   string
	ProcessID                                           *string
	Topic                                               string
	Partition                                           int32
	Offset                                              int64
	Key, Value                                          []byte
	HeaderNames                                         []string
	HeaderValues                                        [][]byte
	MessageID, MessageIdem                              *string
	MessageCreated                                      *time.Time
	MessageSystem, MessageService, MessageType, MsgTypV *string
	CausingMessage                                      string
	Attempt                                             int
	NextAttemptAt                                       *time.Time
	StateReason, ClosedReason                           *string
	GroupID                                             int64
	CreatedAt                                           time.Time
}

func loadRow(t *testing.T, pool *pgxpool.Pool, idem string) storedRow {
	t.Helper()
	var r storedRow
	err := pool.QueryRow(context.Background(), `
		SELECT id, state, temporality, error_code, error_message, error_description, stack_trace, stack_trace_hash,
			event_id, idempotence_id, event_created, publisher_system, publisher_service, process_id,
			original_topic, original_partition, original_offset, original_key, original_value, header_names, header_values,
			message_id, message_idempotence_id, message_created, message_system, message_service, message_type, message_type_version,
			causing_message, attempt, next_attempt_at, state_reason, closed_reason, group_id, created_at
		FROM failures WHERE idempotence_id = $1`, idem).Scan(
		&r.ID, &r.State, &r.Temporality, &r.ErrorCode, &r.ErrorMessage, &r.ErrorDescription, &r.StackTrace, &r.StackTraceHash,
		&r.EventID, &r.IdempotenceID, &r.EventCreated, &r.PublisherSystem, &r.PublisherService, &r.ProcessID,
		&r.Topic, &r.Partition, &r.Offset, &r.Key, &r.Value, &r.HeaderNames, &r.HeaderValues,
		&r.MessageID, &r.MessageIdem, &r.MessageCreated, &r.MessageSystem, &r.MessageService, &r.MessageType, &r.MsgTypV,
		&r.CausingMessage, &r.Attempt, &r.NextAttemptAt, &r.StateReason, &r.ClosedReason, &r.GroupID, &r.CreatedAt)
	if err != nil {
		t.Fatalf("load failure %s: %v", idem, err)
	}
	return r
}

func countRows(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func eqTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// checkStored compares every stored field with the event, byte for byte.
func checkStored(t *testing.T, r storedRow, e *avro.Event, headers []avro.Header) {
	t.Helper()
	p := e.Payload
	md := p.FailedMessageMetadata
	if md == nil {
		md = &avro.Metadata{}
	}
	checks := []struct {
		field string
		ok    bool
	}{
		{"temporality", r.Temporality == string(e.References.ErrorType.Temporality)},
		{"error_code", r.ErrorCode == e.References.ErrorType.Code},
		{"error_message", r.ErrorMessage == p.ErrorMessage},
		{"error_description", eqPtr(r.ErrorDescription, p.ErrorDescription)},
		{"stack_trace", eqPtr(r.StackTrace, p.StackTrace)},
		{"stack_trace_hash", eqPtr(r.StackTraceHash, p.StackTraceHash)},
		{"event_id", r.EventID == e.Identity.EventID},
		{"idempotence_id", r.IdempotenceID == e.Identity.IdempotenceID},
		{"event_created", r.EventCreated.Equal(e.Identity.Created)},
		{"publisher_system", r.PublisherSystem == e.Publisher.System},
		{"publisher_service", r.PublisherService == e.Publisher.Service},
		{"process_id", eqPtr(r.ProcessID, e.ProcessID)},
		{"original_topic", r.Topic == e.References.Message.TopicName},
		{"original_partition", r.Partition == e.References.Message.Partition},
		{"original_offset", r.Offset == e.References.Message.Offset},
		{"original_key", bytes.Equal(r.Key, p.OriginalKey) && (r.Key == nil) == (p.OriginalKey == nil)},
		{"original_value", bytes.Equal(r.Value, p.OriginalMessage) && r.Value != nil},
		{"message_id", eqPtr(r.MessageID, md.EventID)},
		{"message_idempotence_id", eqPtr(r.MessageIdem, md.IdempotenceID)},
		{"message_created", eqTime(r.MessageCreated, md.Created)},
		{"message_system", eqPtr(r.MessageSystem, md.System)},
		{"message_service", eqPtr(r.MessageService, md.Service)},
		{"message_type", eqPtr(r.MessageType, md.MessageTypeName)},
		{"message_type_version", eqPtr(r.MsgTypV, md.MessageTypeVersion)},
		{"causing_message", r.CausingMessage == store.CausingMessage(e, headers)},
		{"closed_reason", r.ClosedReason == nil},
		{"created_at", r.CreatedAt.Equal(intakeNow)},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s differs from the event: row %+v", c.field, r)
		}
	}
	if len(r.HeaderNames) != len(headers) || len(r.HeaderValues) != len(headers) {
		t.Fatalf("stored %d header names and %d values, want %d", len(r.HeaderNames), len(r.HeaderValues), len(headers))
	}
	for i, h := range headers {
		v := r.HeaderValues[i]
		if r.HeaderNames[i] != h.Name || !bytes.Equal(v, h.Value) || (v == nil) != (h.Value == nil) {
			t.Errorf("header %d = %q:%q (nil %v), want %q:%q (nil %v)", i, r.HeaderNames[i], v, v == nil, h.Name, h.Value, h.Value == nil)
		}
	}
}

func TestIngestVectors(t *testing.T) {
	t.Parallel()
	s, pool := newIntakeStore(t)
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../avro/testdata/vectors/*.single.bin")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	var batch []store.Incoming
	for _, f := range files {
		if filepath.Ext(filepath.Base(f[:len(f)-len(".single.bin")])) == ".key" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		e, err := codec.DecodeEvent("errors", b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := store.ValidateIncoming(incoming(t, e)); err != nil {
			t.Fatalf("%s: ValidateIncoming: %v", f, err)
		}
		batch = append(batch, incoming(t, e))
	}
	res := ingest(t, s, batch...)
	if res.Inserted != len(batch) || res.Duplicates != 0 {
		t.Fatalf("Ingest = %+v, want %d inserted", res, len(batch))
	}
	for i, in := range batch {
		r := loadRow(t, pool, in.Event.Identity.IdempotenceID)
		checkStored(t, r, in.Event, in.Headers)
		o := res.Outcomes[i]
		if r.ID != o.ID || r.State != string(o.State) || r.Attempt != o.Attempt || r.GroupID != o.GroupID {
			t.Errorf("outcome %+v does not describe row %+v", o, r)
		}
		switch in.Event.References.ErrorType.Temporality {
		case avro.Temporary:
			if r.State != "RETRY_PENDING" || r.NextAttemptAt == nil || !r.NextAttemptAt.Equal(intakeNow.Add(time.Minute)) {
				t.Errorf("TEMPORARY stored as %s due %v, want RETRY_PENDING due %v", r.State, r.NextAttemptAt, intakeNow.Add(time.Minute))
			}
		default:
			if r.State != "PERMANENT" || r.NextAttemptAt != nil || r.StateReason != nil {
				t.Errorf("%s stored as %s due %v reason %v, want PERMANENT, no due time, no reason",
					in.Event.References.ErrorType.Temporality, r.State, r.NextAttemptAt, r.StateReason)
			}
		}
	}
}

func TestIngestExactBytes(t *testing.T) {
	t.Parallel()
	s, pool := newIntakeStore(t)
	headers := []avro.Header{
		{Name: "b", Value: []byte{0, 1, 2}},
		{Name: "a", Value: nil},
		{Name: "b", Value: []byte{}},
		{Name: "z", Value: []byte("last")},
		{Name: "b", Value: []byte{0xff}},
	}
	withHeaders := func(idem string, key []byte) *avro.Event {
		e := intakeEvent(idem, avro.Permanent)
		e.Payload.OriginalKey = key
		e.Payload.OriginalMessage = []byte{0, 0xff, 0xc3, 0x01, 0, '\\', 'x'}
		e.Payload.FailedMessageMetadata = &avro.Metadata{}
		if err := e.Payload.FailedMessageMetadata.SetHeaders(headers); err != nil {
			t.Fatal(err)
		}
		return e
	}
	cases := []*avro.Event{
		withHeaders("null-key", nil),
		withHeaders("empty-key", []byte{}),
		withHeaders("binary-key", []byte{0, 0xfe, 0}),
	}
	var batch []store.Incoming
	for _, e := range cases {
		batch = append(batch, incoming(t, e))
	}
	ingest(t, s, batch...)
	for _, in := range batch {
		if !reflect.DeepEqual(in.Headers, headers) {
			t.Fatalf("OriginalHeaders = %v, want %v", in.Headers, headers)
		}
		checkStored(t, loadRow(t, pool, in.Event.Identity.IdempotenceID), in.Event, headers)
	}
}

func TestIngestDuplicates(t *testing.T) {
	t.Parallel()
	s, pool := newIntakeStore(t)
	ea, eb := intakeEvent("idem-a", avro.Temporary), intakeEvent("idem-b", avro.Permanent)
	eb.References.Message.Offset++ // another causing message
	a, b := incoming(t, ea), incoming(t, eb)

	first := ingest(t, s, a, b, a) // a repeat within the batch
	if first.Inserted != 2 || first.Duplicates != 1 {
		t.Fatalf("first batch = %d inserted, %d duplicates; want 2, 1", first.Inserted, first.Duplicates)
	}
	if o := first.Outcomes[2]; !o.Duplicate || o.ID != first.Outcomes[0].ID || o.State != store.StateRetryPending || o.GroupID == 0 {
		t.Errorf("repeat outcome = %+v, want a duplicate of %+v", o, first.Outcomes[0])
	}

	again := ingest(t, s, b, a) // redelivery
	if again.Inserted != 0 || again.Duplicates != 2 {
		t.Fatalf("redelivered batch = %d inserted, %d duplicates; want 0, 2", again.Inserted, again.Duplicates)
	}
	if again.Outcomes[0].ID != first.Outcomes[1].ID || again.Outcomes[1].ID != first.Outcomes[0].ID {
		t.Errorf("duplicates name ids %v, want the stored rows' %v", again.Outcomes, first.Outcomes)
	}
	if n := countRows(t, pool, "SELECT count(*) FROM failures"); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	if n := countRows(t, pool, "SELECT max(attempt) FROM failures"); n != 1 {
		t.Errorf("duplicates counted as attempts: max attempt %d", n)
	}
}

func TestIngestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	s, pool := newIntakeStore(t)
	var batch []store.Incoming
	for i := 0; i < 200; i++ {
		e := intakeEvent(fmt.Sprintf("idem-%03d", i), avro.Temporary)
		e.References.Message.Offset = int64(i % 20) // ten failures per causing message
		batch = append(batch, incoming(t, e))
	}
	const instances = 4
	var wg sync.WaitGroup
	results := make([]store.IngestResult, instances)
	errs := make([]error, instances)
	for i := 0; i < instances; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.Ingest(context.Background(), batch, intakeNext)
		}()
	}
	wg.Wait()
	inserted := 0
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("instance %d: %v", i, errs[i])
		}
		inserted += results[i].Inserted
	}
	if inserted != len(batch) {
		t.Errorf("instances inserted %d rows in all, want %d", inserted, len(batch))
	}
	if n := countRows(t, pool, "SELECT count(*) FROM failures"); n != len(batch) {
		t.Fatalf("%d rows, want %d", n, len(batch))
	}
	// Attempts stay exact: 1..10 per causing message.
	if n := countRows(t, pool, `SELECT count(*) FROM (SELECT causing_message FROM failures GROUP BY causing_message
		HAVING array_agg(attempt ORDER BY attempt) <> array(SELECT generate_series(1, 10))) bad`); n != 0 {
		t.Errorf("%d causing messages with wrong attempt numbers", n)
	}
}

func TestIngestAttemptsPerCausingMessage(t *testing.T) {
	t.Parallel()
	s, pool := newIntakeStore(t)
	byEventID := func(idem string) store.Incoming {
		e := intakeEvent(idem, avro.Temporary)
		e.Payload.FailedMessageMetadata = &avro.Metadata{EventID: avro.Ptr("msg-1"), Headers: map[string][]byte{}}
		return incoming(t, e)
	}
	byOrigin := func(idem string, offset int64) store.Incoming {
		e := intakeEvent(idem, avro.Temporary)
		e.References.Message.Offset = offset // resends land at new offsets
		e.Payload.FailedMessageMetadata = &avro.Metadata{}
		if err := e.Payload.FailedMessageMetadata.SetHeaders([]avro.Header{{Name: avro.HeaderOrigin, Value: []byte("orders/1/7")}}); err != nil {
			t.Fatal(err)
		}
		return incoming(t, e)
	}
	byPosition := func(idem string) store.Incoming { return incoming(t, intakeEvent(idem, avro.Permanent)) }

	first := ingest(t, s, byEventID("e1"), byOrigin("o1", 7), byEventID("e2"), byPosition("p1"))
	second := ingest(t, s, byEventID("e3"), byOrigin("o2", 100), byPosition("p2"), byEventID("e4"), byOrigin("o3", 200))

	want := map[string]struct {
		attempt int
		state   string
		cause   string
	}{
		"e1": {1, "RETRY_PENDING", "msg-1"}, "e2": {2, "RETRY_PENDING", "msg-1"},
		"e3": {3, "PERMANENT", "msg-1"}, "e4": {4, "PERMANENT", "msg-1"},
		"o1": {1, "RETRY_PENDING", "orders/1/7"}, "o2": {2, "RETRY_PENDING", "orders/1/7"}, "o3": {3, "PERMANENT", "orders/1/7"},
		"p1": {1, "PERMANENT", "orders/1/42"}, "p2": {2, "PERMANENT", "orders/1/42"},
	}
	for idem, w := range want {
		r := loadRow(t, pool, idem)
		if r.Attempt != w.attempt || r.State != w.state || r.CausingMessage != w.cause {
			t.Errorf("%s: attempt %d state %s cause %q; want %d %s %q", idem, r.Attempt, r.State, r.CausingMessage, w.attempt, w.state, w.cause)
		}
		exhausted := w.state == "PERMANENT" && r.Temporality == "TEMPORARY"
		if exhausted != (r.StateReason != nil && *r.StateReason == store.StateReasonRetriesExhausted) {
			t.Errorf("%s: state_reason %v, want %q only when retries are exhausted", idem, r.StateReason, store.StateReasonRetriesExhausted)
		}
		if (r.State == "RETRY_PENDING") != (r.NextAttemptAt != nil) {
			t.Errorf("%s: %s with next_attempt_at %v", idem, r.State, r.NextAttemptAt)
		}
		if r.State == "RETRY_PENDING" && !r.NextAttemptAt.Equal(intakeNow.Add(time.Duration(r.Attempt)*time.Minute)) {
			t.Errorf("%s: next_attempt_at %v, want now + %d min", idem, r.NextAttemptAt, r.Attempt)
		}
	}
	if first.Outcomes[2].Attempt != 2 || second.Outcomes[3].Attempt != 4 {
		t.Errorf("outcomes %+v / %+v disagree with the rows", first.Outcomes, second.Outcomes)
	}
}

func TestIngestGroups(t *testing.T) {
	t.Parallel()
	s, pool := newIntakeStore(t)
	kind := func(idem, hash string, typ *string) store.Incoming {
		e := intakeEvent(idem, avro.Permanent)
		if hash != "" {
			e.Payload.StackTraceHash = &hash
		}
		if typ != nil {
			e.Payload.FailedMessageMetadata = &avro.Metadata{MessageTypeName: typ, Headers: map[string][]byte{}}
		}
		return incoming(t, e)
	}
	res := ingest(t, s, kind("a1", "h1", nil), kind("a2", "h1", nil), kind("b1", "h2", nil), kind("c1", "h1", avro.Ptr("Order")))
	o := res.Outcomes
	if o[0].GroupID != o[1].GroupID || o[0].GroupID == o[2].GroupID || o[0].GroupID == o[3].GroupID {
		t.Fatalf("groups %d %d %d %d: want the first two equal, the others apart", o[0].GroupID, o[1].GroupID, o[2].GroupID, o[3].GroupID)
	}
	var svc, typ, code, hash string
	if err := pool.QueryRow(context.Background(), `SELECT publisher_service, message_type, error_code, stack_trace_hash
		FROM failure_groups WHERE id = $1`, o[3].GroupID).Scan(&svc, &typ, &code, &hash); err != nil {
		t.Fatal(err)
	}
	if svc != "billing" || typ != "Order" || code != "BOOM" || hash != "h1" {
		t.Errorf("group key = (%q, %q, %q, %q)", svc, typ, code, hash)
	}

	// A later batch joins the existing group and moves its last_seen.
	later := intakeNow.Add(time.Hour)
	s2, err := store.New(store.Config{Pool: pool, Now: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	res2, err := s2.Ingest(context.Background(), []store.Incoming{kind("a3", "h1", nil)}, intakeNext)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Outcomes[0].GroupID != o[0].GroupID {
		t.Errorf("a3 joined group %d, want %d", res2.Outcomes[0].GroupID, o[0].GroupID)
	}
	var first, last time.Time
	if err := pool.QueryRow(context.Background(), `SELECT first_seen, last_seen FROM failure_groups WHERE id = $1`, o[0].GroupID).Scan(&first, &last); err != nil {
		t.Fatal(err)
	}
	if !first.Equal(intakeNow) || !last.Equal(later) {
		t.Errorf("first_seen %v last_seen %v, want %v and %v", first, last, intakeNow, later)
	}
	if n := countRows(t, pool, "SELECT count(*) FROM failure_groups"); n != 3 {
		t.Errorf("%d groups, want 3", n)
	}
}

func TestIngestBadData(t *testing.T) {
	t.Parallel()
	s, pool := newIntakeStore(t)
	cases := map[string]func(e *avro.Event) []avro.Header{
		"empty idempotence id": func(e *avro.Event) []avro.Header { e.Identity.IdempotenceID = ""; return nil },
		"NUL in message":       func(e *avro.Event) []avro.Header { e.Payload.ErrorMessage = "a\x00b"; return nil },
		"invalid UTF-8":        func(e *avro.Event) []avro.Header { e.Publisher.Service = "\xff"; return nil },
		"header name":          func(e *avro.Event) []avro.Header { return []avro.Header{{Name: "ok"}, {Name: "bad\x00"}} },
		"origin header": func(e *avro.Event) []avro.Header {
			return []avro.Header{{Name: avro.HeaderOrigin, Value: []byte{0xc3, 0x28}}}
		},
		"created out of range": func(e *avro.Event) []avro.Header { e.Identity.Created = time.UnixMilli(1 << 62); return nil },
		"bad temporality":      func(e *avro.Event) []avro.Header { e.References.ErrorType.Temporality = "SOMETIMES"; return nil },
		"long idempotence id": func(e *avro.Event) []avro.Header {
			e.Identity.IdempotenceID = strings.Repeat("i", store.MaxKeyText+1)
			return nil
		},
		"long group key": func(e *avro.Event) []avro.Header {
			e.Payload.StackTraceHash = avro.Ptr(strings.Repeat("h", store.MaxGroupKey))
			return nil
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			good := incoming(t, intakeEvent("good-"+name, avro.Permanent))
			e := intakeEvent("bad-"+name, avro.Permanent)
			bad := store.Incoming{Event: e, Headers: spoil(e)}
			if err := store.ValidateIncoming(bad); !errors.Is(err, store.ErrBadData) {
				t.Errorf("ValidateIncoming = %v, want ErrBadData", err)
			}
			_, err := s.Ingest(context.Background(), []store.Incoming{good, bad}, intakeNext)
			var bde *store.BadDataError
			if !errors.As(err, &bde) || bde.Index != 1 || !errors.Is(err, store.ErrBadData) {
				t.Fatalf("Ingest = %v, want a BadDataError for event 1", err)
			}
			if n := countRows(t, pool, "SELECT count(*) FROM failures WHERE idempotence_id = $1", "good-"+name); n != 0 {
				t.Error("a batch with bad data wrote rows")
			}
		})
	}
}

func TestIngestNeedsNextAttempt(t *testing.T) {
	t.Parallel()
	s, _ := newIntakeStore(t)
	if _, err := s.Ingest(context.Background(), []store.Incoming{incoming(t, intakeEvent("x", avro.Temporary))}, nil); err == nil {
		t.Fatal("Ingest without NextAttempt succeeded")
	}
	if res, err := s.Ingest(context.Background(), nil, intakeNext); err != nil || res.Inserted != 0 {
		t.Fatalf("empty batch = %+v, %v", res, err)
	}
}

func TestStateStats(t *testing.T) {
	t.Parallel()
	s, pool := newIntakeStore(t)
	st, err := s.StateStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range store.States {
		if n, ok := st.Counts[state]; !ok || n != 0 {
			t.Errorf("empty store: %s count %d (present %v), want 0", state, n, ok)
		}
	}
	if len(st.Oldest) != 0 {
		t.Errorf("empty store: oldest %v", st.Oldest)
	}
	ingest(t, s, incoming(t, intakeEvent("t1", avro.Temporary)), incoming(t, intakeEvent("p1", avro.Permanent)),
		incoming(t, intakeEvent("p2", avro.Unknown)))
	if _, err := pool.Exec(context.Background(), `UPDATE failures SET created_at = created_at - interval '1 hour' WHERE idempotence_id = 'p2'`); err != nil {
		t.Fatal(err)
	}
	st, err = s.StateStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts[store.StateRetryPending] != 1 || st.Counts[store.StatePermanent] != 2 || st.Counts[store.StateResent] != 0 {
		t.Errorf("counts = %v", st.Counts)
	}
	if !st.Oldest[store.StatePermanent].Equal(intakeNow.Add(-time.Hour)) || !st.Oldest[store.StateRetryPending].Equal(intakeNow) {
		t.Errorf("oldest = %v", st.Oldest)
	}
	if _, ok := st.Oldest[store.StateResent]; ok {
		t.Errorf("oldest RESENT %v without a RESENT failure", st.Oldest[store.StateResent])
	}
	// RESENT is counted as all failures less the others (migration 026), and its oldest found
	// by walking the records: mark the older PERMANENT one and close the other.
	for _, q := range []string{
		`UPDATE failures SET state = 'RESENT', resent_at = now() WHERE idempotence_id = 'p2'`,
		`UPDATE failures SET state = 'CLOSED', closed_reason = 'done' WHERE idempotence_id = 'p1'`,
	} {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	st, err = s.StateStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts[store.StateRetryPending] != 1 || st.Counts[store.StatePermanent] != 0 || st.Counts[store.StateResent] != 1 ||
		st.Counts[store.StateClosed] != 1 {
		t.Errorf("counts after a mark and a close = %v", st.Counts)
	}
	if !st.Oldest[store.StateResent].Equal(intakeNow.Add(-time.Hour)) || !st.Oldest[store.StateClosed].Equal(intakeNow) {
		t.Errorf("oldest after a mark and a close = %v", st.Oldest)
	}
	if _, ok := st.Oldest[store.StatePermanent]; ok {
		t.Errorf("oldest PERMANENT %v without a PERMANENT failure", st.Oldest[store.StatePermanent])
	}
}

// BenchmarkIngest writes batches of 1,000 new failures with 512-byte values and two headers.
func BenchmarkIngest(b *testing.B) {
	pool := testkit.Postgres(b)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	const size = 1000
	value := bytes.Repeat([]byte{0xa5}, 512)
	batches := make([][]store.Incoming, b.N)
	for i := range batches {
		batches[i] = make([]store.Incoming, size)
		for j := range batches[i] {
			e := intakeEvent(uuid.NewString(), avro.Temporary)
			e.Payload.OriginalMessage = value
			e.Payload.FailedMessageMetadata = &avro.Metadata{EventID: avro.Ptr(uuid.NewString()), MessageTypeName: avro.Ptr("Order")}
			batches[i][j] = store.Incoming{Event: e, Headers: []avro.Header{{Name: "a", Value: []byte("1")}, {Name: "b", Value: nil}}}
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Ingest(context.Background(), batches[i], intakeNext); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "rows/s")
}

func TestStateStatsByCluster(t *testing.T) {
	t.Parallel()
	s, _ := newIntakeStore(t)
	ctx := context.Background()
	byCluster, err := s.StateStatsByCluster(ctx)
	if err != nil || len(byCluster) != 0 {
		t.Fatalf("empty store: %v, %v", byCluster, err)
	}
	// One cluster: the count of the states alone, under that cluster's name.
	ingest(t, s, incoming(t, intakeEvent("t1", avro.Temporary)), incoming(t, intakeEvent("p1", avro.Permanent)))
	byCluster, err = s.StateStatsByCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(byCluster) != 1 || byCluster[redrive.DefaultCluster].Counts[store.StateRetryPending] != 1 ||
		byCluster[redrive.DefaultCluster].Counts[store.StatePermanent] != 1 || byCluster[redrive.DefaultCluster].Counts[store.StateClosed] != 0 {
		t.Fatalf("one cluster: %+v", byCluster)
	}
	// Several: each cluster its own counts, together the counts of StateStats.
	for i, cluster := range []string{"east", "west", "west"} {
		in := incoming(t, intakeEvent(fmt.Sprintf("c%d", i), avro.Permanent))
		in.Event.References.Message.Offset = int64(100 + i)
		in.Source = store.Source{Cluster: cluster}
		ingest(t, s, in)
	}
	byCluster, err = s.StateStatsByCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{redrive.DefaultCluster: 1, "east": 1, "west": 2}
	if len(byCluster) != 3 {
		t.Fatalf("several clusters: %+v", byCluster)
	}
	for cluster, n := range want {
		if got := byCluster[cluster].Counts[store.StatePermanent]; got != n {
			t.Errorf("%s PERMANENT = %d, want %d", cluster, got, n)
		}
	}
	all, err := s.StateStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range store.States {
		var sum int64
		for _, st := range byCluster {
			sum += st.Counts[state]
		}
		if sum != all.Counts[state] {
			t.Errorf("%s: %d over the clusters, %d in all", state, sum, all.Counts[state])
		}
	}
}
