package store_test

import (
	"context"
	"testing"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// The intake stores a parked record's head reference (the redrive-parked-head entry of its
// MPFE) as the failure's link, once however often the event is delivered; a PARKED_BEHIND
// event without the entry and any other event get none. The chain is read by the link.
func TestIngestStoresParkedLinks(t *testing.T) {
	t.Parallel()
	s, pool := newIntakeStore(t)
	ev := func(idem, eventID, code string, offset int64, head string) store.Incoming {
		e := intakeEvent(idem, avro.Permanent)
		e.References.ErrorType.Code = code
		e.References.Message.Offset = offset
		e.Payload.OriginalKey = []byte("K")
		e.Payload.FailedMessageMetadata = &avro.Metadata{EventID: avro.Ptr(eventID), Headers: map[string][]byte{}}
		if head != "" {
			e.Payload.FailedMessageMetadata.Headers[avro.ParkedHeadEntry] = []byte(head)
			e.Payload.FailedMessageMetadata.Headers[avro.ParkedBehindEntry] = []byte("head-event")
		}
		return incoming(t, e)
	}
	res := ingest(t, s, ev("h", "H", "BOOM", 10, ""), ev("p2", "P2", avro.CodeParkedBehind, 12, "H"),
		ev("p1", "P1", avro.CodeParkedBehind, 11, "H"), ev("x", "X", avro.CodeParkedBehind, 13, ""))
	ingest(t, s, ev("p1", "P1", avro.CodeParkedBehind, 11, "H")) // delivered again
	var n int
	var headEvent string
	if err := pool.QueryRow(context.Background(), `SELECT count(*), max(head_event) FROM failure_links WHERE head = 'H'`).Scan(&n, &headEvent); err != nil || n != 2 || headEvent != "head-event" {
		t.Fatalf("%d links to H (event %q, %v), want 2", n, headEvent, err)
	}
	ch, err := s.ParkedChain(context.Background(), res.Outcomes[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Head == nil || ch.Head.ID != res.Outcomes[0].ID || len(ch.Parked) != 2 ||
		ch.Parked[0].ID != res.Outcomes[2].ID || ch.Parked[1].ID != res.Outcomes[1].ID {
		t.Errorf("chain of the head: %+v, want P1 then P2 behind it", ch)
	}
	if ch, err := s.ParkedChain(context.Background(), res.Outcomes[3].ID); err != nil || !ch.IsZero() {
		t.Errorf("a parked event without a head reference: %+v %v, want no chain", ch, err)
	}
}
