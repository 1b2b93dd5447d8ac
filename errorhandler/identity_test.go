package errorhandler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
)

func TestIdempotenceIDIsDeterministic(t *testing.T) {
	base := eh.Message{Topic: "orders", Partition: 3, Offset: 42, Value: []byte("v"), Timestamp: time.UnixMilli(1_700_000_000_123),
		Headers: []eh.Header{{Key: "type", Value: []byte("OrderPlaced")}}}
	id := eh.IdempotenceID("g", &base)
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id || u.Version() != 5 || u.Variant() != uuid.RFC4122 {
		t.Fatalf("idempotenceId %q (%v): want a canonical version 5 RFC 4122 UUID", id, err)
	}
	// The same record, whatever its bytes or other headers: the same id.
	same := base
	same.Value = []byte("other bytes, same record")
	same.Headers = nil
	same.Raw = "client record"
	if got := eh.IdempotenceID("g", &same); got != id {
		t.Errorf("the same record gives %s, then %s", id, got)
	}
	// Anything that makes it another failure: another id.
	withOrigin := func(v string) eh.Message {
		m := base
		m.Headers = append([]eh.Header{{Key: avro.HeaderOrigin, Value: []byte(v)}}, base.Headers...)
		return m
	}
	seen := map[string]string{id: "base"}
	for name, tc := range map[string]struct {
		group string
		m     eh.Message
	}{
		"group":     {"g2", base},
		"topic":     {"g", func() eh.Message { m := base; m.Topic = "orders2"; return m }()},
		"partition": {"g", func() eh.Message { m := base; m.Partition = 4; return m }()},
		"offset":    {"g", func() eh.Message { m := base; m.Offset = 43; return m }()},
		"timestamp": {"g", func() eh.Message { m := base; m.Timestamp = m.Timestamp.Add(time.Millisecond); return m }()},
		"origin a":  {"g", withOrigin("orders/3/7")},
		"origin b":  {"g", withOrigin("orders/3/8")},
		"field cut": {"g", func() eh.Message { m := base; m.Topic = "order"; return m }()},
	} {
		got := eh.IdempotenceID(tc.group, &tc.m)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s gives the same id as %s", name, prev)
		}
		seen[got] = name
	}
	// Field boundaries are unambiguous: group "ab" + topic "c" differs from group "a" + topic "bc".
	m1, m2 := base, base
	m1.Topic, m2.Topic = "c", "bc"
	if eh.IdempotenceID("ab", &m1) == eh.IdempotenceID("a", &m2) {
		t.Error("field boundaries are ambiguous")
	}
}

// TestIdempotenceIDIsStable pins two identities: a change of the derivation would give a
// record dead-lettered again after an upgrade a new id, and the service would store it twice.
func TestIdempotenceIDIsStable(t *testing.T) {
	m := &eh.Message{Topic: "orders", Partition: 3, Offset: 42, Timestamp: time.UnixMilli(1700000000000),
		Headers: []eh.Header{{Key: "redrive-origin", Value: []byte("abc")}}}
	if got, want := eh.IdempotenceID("g1", m), "c4372390-2c07-5252-94e3-6a7c98a92800"; got != want {
		t.Errorf("IdempotenceID = %s, want %s", got, want)
	}
	if got, want := eh.IdempotenceID("", &eh.Message{}), "7d784792-ed16-5a7f-8cd5-f7c9e5f7e9e9"; got != want {
		t.Errorf("IdempotenceID of the zero message = %s, want %s", got, want)
	}
	long := &eh.Message{Topic: strings.Repeat("t", 300), Offset: 1}
	if a, b := eh.IdempotenceID(strings.Repeat("g", 300), long), eh.IdempotenceID(strings.Repeat("g", 300), long); a != b {
		t.Errorf("a long name gives %s then %s", a, b)
	}
}
