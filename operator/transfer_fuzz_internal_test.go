package operator

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/store"
)

// transferSeed is a valid export line.
const transferSeed = `{"format":"redrive.failure.v1","id":"6f1c9a4e-5b0e-4c51-9a59-0e8f2f5e8a11","state":"PERMANENT",` +
	`"state_reason":null,"temporality":"PERMANENT","error_code":"E","error_message":"boom","error_description":null,` +
	`"stack_trace":null,"stack_trace_hash":null,"event_id":"ev","idempotence_id":"idem","event_created":"2024-05-01T10:00:00Z",` +
	`"publisher_system":"sys","publisher_service":"svc","process_id":null,"topic":"orders","partition":0,"offset":"42",` +
	`"key":"a2V5","value":"eyJ4IjoxfQ==","headers":[{"name":"h","value":"dg=="},{"name":"n","value":null}],` +
	`"message":{"id":null,"idempotence_id":null,"created":null,"system":null,"service":null,"type":"T","type_version":null},` +
	`"causing_message":"orders/0/42","attempt":1,"next_attempt_at":null,"resend_failures":0,"last_resend_error":null,` +
	`"resent_at":null,"closed_reason":null,"closed_by":null,"closed_at":null,` +
	`"source":{"format":"mpfe","topic":null,"partition":null,"offset":null},` +
	`"group":{"publisher_service":"svc","message_type":"T","error_code":"E","stack_trace_hash":"","ticket":null,"note":null},` +
	`"created_at":"2024-05-01T10:00:01Z","updated_at":"2024-05-01T10:00:01Z"}`

// Any line either decodes to a record the store accepts as the intake would (every text UTF-8
// without NUL, the limits kept, the table's rules held) or is refused with an error: the
// decoder never panics, and nothing it accepts could make the database refuse the import.
func FuzzParseTransferRecord(f *testing.F) {
	f.Add([]byte(transferSeed))
	f.Add([]byte(strings.Replace(transferSeed, `"boom"`, `"bo\u0000om"`, 1)))
	f.Add([]byte(strings.Replace(transferSeed, `"orders"`, `"`+strings.Repeat("t", 2000)+`"`, 1)))
	f.Add([]byte(strings.Replace(transferSeed, `"state":"PERMANENT"`, `"state":"RETRY_PENDING"`, 1)))
	f.Add([]byte(strings.Replace(transferSeed, `"format":"redrive`, `"masked":true,"format":"redrive`, 1)))
	f.Add([]byte(strings.Replace(transferSeed, `"note":null`, `"note":"\ud800"`, 1)))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseTransferRecord(line)
		if err != nil {
			if r != nil {
				t.Fatalf("a refused line returned a record")
			}
			return
		}
		if err := store.ValidateTransfer(r); err != nil {
			t.Fatalf("accepted record fails the store's rules: %v", err)
		}
		x := &r.Failure
		for _, s := range []string{x.Topic, x.ErrorCode, x.ErrorMessage, x.EventID, x.IdempotenceID, x.CausingMessage,
			x.PublisherService, x.PublisherSystem, r.Group.ErrorCode, r.Group.MessageType} {
			if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("accepted text %q is not storable", s)
			}
		}
		for _, p := range []*string{r.Group.Note, r.Group.Ticket, r.StateReason, x.ClosedReason} {
			if p != nil && (!utf8.ValidString(*p) || strings.IndexByte(*p, 0) >= 0) {
				t.Fatalf("accepted text %q is not storable", *p)
			}
		}
		if r.Group.Note != nil && utf8.RuneCountInString(*r.Group.Note) > redrive.MaxNoteLen {
			t.Fatalf("accepted a note of %d characters", utf8.RuneCountInString(*r.Group.Note))
		}
		if len(x.Topic) > redrive.MaxKeyText {
			t.Fatalf("accepted a topic of %d bytes", len(x.Topic))
		}
	})
}

// Any input splits into lines within the bound, or says which line is too long; the reader
// never returns more than the bound.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("a\nb\r\n\nc"), 4)
	f.Add([]byte("toolongline\nx"), 3)
	f.Fuzz(func(t *testing.T, in []byte, limit int) {
		if limit < 1 || limit > 1<<16 {
			return
		}
		br := bufio.NewReaderSize(bytes.NewReader(in), 16)
		for range len(in) + 1 {
			b, err := readLine(br, limit)
			if err == errLineTooLong {
				return
			}
			if len(b) > limit+1 {
				t.Fatalf("line of %d bytes, bound %d", len(b), limit)
			}
			if err != nil {
				return
			}
		}
	})
}
