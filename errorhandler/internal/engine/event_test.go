package engine

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
)

func testMessage(value, key []byte, hs ...eh.Header) *eh.Message {
	return &eh.Message{Topic: "orders", Partition: 7, Offset: 1 << 40, Key: key, Value: value, Headers: hs,
		Timestamp: time.UnixMilli(1_700_000_000_000)}
}

// params returns the event parameters of msg's failure f with fixed ids.
func params(msg *eh.Message, f failure, system, service string, ids [2]string, now time.Time, info eh.MessageInfo) *eventParams {
	return &eventParams{msg: msg, f: f, system: system, service: service, eventID: ids[0], idempotenceID: ids[1], now: now, info: info}
}

func TestEventEncodingMatchesTheAvroPackage(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	cases := []struct {
		name string
		msg  *eh.Message
		info eh.MessageInfo
		err  error
	}{
		{"minimal", testMessage([]byte("v"), nil), eh.MessageInfo{}, errors.New("boom")},
		{"tombstone with empty key", testMessage(nil, []byte{}), eh.MessageInfo{}, errors.New("tombstone failed")},
		{"unicode and binary", testMessage([]byte{0, 1, 2, 0xff}, []byte("ключ")), eh.MessageInfo{ID: "id-1", Type: "Order", Version: "2", System: "shop", Service: "web", IdempotenceID: "i-1", Created: now}, fmt.Errorf("wrap: %w", errors.New("ünïcode"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, key := buildEvent(params(tc.msg, classifyFailure(nil, eh.PhaseProcess, tc.err), "sys", "svc", [2]string{"e-1", "i-2"}, now, tc.info))
			got, err := appendEvent(nil, ev, &tc.msg.Headers)
			if err != nil {
				t.Fatal(err)
			}
			ev = eventWithHeaders(ev, tc.msg.Headers)
			// One map entry (redrive-headers): the generic encoder's bytes must be identical.
			want, err := avro.MarshalEvent(ev)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("datum differs from avro.MarshalEvent:\n got %x\nwant %x", got, want)
			}
			back, err := avro.UnmarshalEvent(got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, ev) {
				t.Errorf("round trip:\n got %+v\nwant %+v", back, ev)
			}
			wantKey := "i-2"
			if tc.info.ID != "" {
				wantKey = tc.info.ID
			}
			kb, _ := avro.MarshalKey(avro.Key{Key: wantKey})
			if key != wantKey || !bytes.Equal(avro.AppendKey(nil, avro.Key{Key: key}), kb) {
				t.Errorf("key %q, want %q", key, wantKey)
			}
		})
	}
}

func TestHeadersKeptExactly(t *testing.T) {
	hs := []eh.Header{
		{Key: "b", Value: []byte("1")},
		{Key: "a", Value: nil},
		{Key: "b", Value: []byte("2")},
		{Key: "c", Value: []byte{}},
		{Key: avro.HeadersEntry, Value: []byte("x")},
	}
	ev, _ := buildEvent(params(testMessage([]byte("v"), nil, hs...), classifyFailure(nil, eh.PhaseDecode, errors.New("x")), "s", "s", [2]string{"a", "b"}, time.Now(), eh.MessageInfo{}))
	full := eventWithHeaders(ev, hs)
	var list []avro.Header
	for _, h := range hs {
		list = append(list, avro.Header{Name: h.Key, Value: h.Value})
	}
	var ref avro.Metadata
	if err := ref.SetHeaders(list); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(full.Payload.FailedMessageMetadata.Headers, ref.Headers) {
		t.Errorf("header map differs from avro.Metadata.SetHeaders:\n got %q\nwant %q", full.Payload.FailedMessageMetadata.Headers, ref.Headers)
	}
	// Several map entries: compare what a reader decodes.
	b, err := appendEvent(nil, ev, &hs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := avro.UnmarshalEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Payload.FailedMessageMetadata.Headers, ref.Headers) {
		t.Errorf("header map read back %q, want %q", back.Payload.FailedMessageMetadata.Headers, ref.Headers)
	}
	got, err := back.Payload.FailedMessageMetadata.OriginalHeaders()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, list) {
		t.Errorf("headers read back %q, want %q", got, list)
	}
}

func FuzzEventEncoding(f *testing.F) {
	f.Add([]byte("value"), []byte("key"), "name", []byte("hv"), "error", "id")
	f.Add([]byte{}, []byte(nil), "", []byte(nil), "", "")
	f.Fuzz(func(t *testing.T, value, key []byte, hname string, hvalue []byte, msg, id string) {
		m := testMessage(value, key, eh.Header{Key: hname, Value: hvalue})
		ev, _ := buildEvent(params(m, classifyFailure(nil, eh.PhaseProcess, errors.New(msg)), "s", "svc", [2]string{"e", "i"}, time.UnixMilli(1), eh.MessageInfo{ID: id}))
		b, err := appendEvent(nil, ev, &m.Headers)
		ev = eventWithHeaders(ev, m.Headers)
		if err != nil {
			t.Fatal(err)
		}
		back, err := avro.UnmarshalEvent(b)
		if err != nil {
			t.Fatalf("own encoding does not decode: %v", err)
		}
		if !bytes.Equal(back.Payload.OriginalMessage, ev.Payload.OriginalMessage) || !bytes.Equal(back.Payload.OriginalKey, ev.Payload.OriginalKey) ||
			back.Payload.ErrorMessage != ev.Payload.ErrorMessage || !reflect.DeepEqual(back.Payload.FailedMessageMetadata, ev.Payload.FailedMessageMetadata) {
			t.Errorf("round trip differs")
		}
	})
}

func TestStackTraceIsCut(t *testing.T) {
	long := strings.Repeat("é", avro.MaxStackTrace) // 2 bytes per character
	got := cutStackTrace(long)
	if !strings.HasSuffix(got, "...") || len(got) > avro.MaxStackTrace+3 || !strings.HasPrefix(long, strings.TrimSuffix(got, "...")) {
		t.Errorf("cut to %d bytes", len(got))
	}
	if s := "short"; cutStackTrace(s) != s {
		t.Errorf("short trace changed")
	}
	ev, _ := buildEvent(params(testMessage([]byte("v"), nil), classifyFailure(nil, eh.PhaseProcess, errors.New(strings.Repeat("x", 10000))), "s", "s", [2]string{"a", "b"}, time.Now(), eh.MessageInfo{}))
	if n := len(*ev.Payload.StackTrace); n != avro.MaxStackTrace+3 {
		t.Errorf("stack trace of %d bytes, want %d", n, avro.MaxStackTrace+3)
	}
}

type codedError struct{ code string }

func (e *codedError) Error() string { return "coded " + e.code }

func TestStackTraceHash(t *testing.T) {
	h := func(phase Phase, err error) string { return stackTraceHash(classifyFailure(nil, phase, err)) }
	base := h(eh.PhaseProcess, fmt.Errorf("order 1: %w", &codedError{"a"}))
	if base != h(eh.PhaseProcess, fmt.Errorf("order 2 of customer 9: %w", &codedError{"b"})) {
		t.Error("same error types with other messages hash differently")
	}
	for name, err := range map[string]error{
		"other type":   fmt.Errorf("order 1: %w", errors.New("x")),
		"unwrapped":    &codedError{"a"},
		"classified":   fmt.Errorf("order 1: %w", eh.Permanent(&codedError{"a"}, "X")),
		"joined":       errors.Join(&codedError{"a"}, errors.New("y")),
		"decode error": &eh.DecodeError{Part: eh.PartValue, Err: &codedError{"a"}},
	} {
		if h(eh.PhaseProcess, err) == base {
			t.Errorf("%s: same hash as the base error", name)
		}
	}
	if h(eh.PhaseDecode, &eh.DecodeError{Part: eh.PartKey, Err: errors.New("x")}) == h(eh.PhaseDecode, &eh.DecodeError{Part: eh.PartValue, Err: errors.New("x")}) {
		t.Error("key and value decode failures share a hash")
	}
	st := stackTrace(fmt.Errorf("outer: %w", errors.Join(errors.New("a\nb"), &codedError{"c"})))
	for _, want := range []string{"*fmt.wrapError: outer", "caused by *errors.joinError", `[0] *errors.errorString: a\nb`, "[1] *engine.codedError: coded c"} {
		if !strings.Contains(st, want) {
			t.Errorf("stack trace lacks %q:\n%s", want, st)
		}
	}
}

func TestOffsetTracker(t *testing.T) {
	var tr offsetTracker
	if got := tr.committable(-1); got != -1 {
		t.Fatalf("empty tracker committable %d", got)
	}
	s3 := &offsetSlot{offset: 3}
	tr.add(s3)
	s5 := &offsetSlot{offset: 5}
	tr.add(s5)
	s6 := &offsetSlot{offset: 6}
	tr.add(s6)
	if got := tr.committable(10); got != 3 {
		t.Fatalf("committable %d, want 3", got)
	}
	tr.finish(s5) // out of order: still held by 3
	if got := tr.committable(10); got != 3 || tr.pending() != 2 {
		t.Fatalf("committable %d pending %d, want 3 and 2", got, tr.pending())
	}
	tr.finish(s3)
	if got := tr.committable(10); got != 6 {
		t.Fatalf("committable %d, want 6", got)
	}
	tr.finish(s6)
	if got := tr.committable(10); got != 10 || tr.pending() != 0 {
		t.Fatalf("committable %d, want 10", got)
	}
}

func TestSampleAndThrottle(t *testing.T) {
	if got := sample([]byte("a\x00\n")); got != `"a\x00\n"` {
		t.Errorf("sample = %s", got)
	}
	if got := sample(bytes.Repeat([]byte{0xff}, 100)); !strings.HasSuffix(got, "... (100 bytes)") || strings.Count(got, `\xff`) != sampleLen {
		t.Errorf("sample of 100 bytes = %s", got)
	}
	now := time.Unix(0, 0)
	th := newThrottle(time.Second, func() time.Time { return now })
	if ok, _ := th.allow("k"); !ok {
		t.Fatal("first line suppressed")
	}
	for range 3 {
		if ok, _ := th.allow("k"); ok {
			t.Fatal("line within the interval let through")
		}
	}
	now = now.Add(time.Second)
	if ok, n := th.allow("k"); !ok || n != 3 {
		t.Errorf("after the interval: %v, %d suppressed, want true, 3", ok, n)
	}
}

// BenchmarkEncodeMPFE compares the hand-written writer with the avro package's generic encoder
// on the same event.
func BenchmarkEncodeMPFE(b *testing.B) {
	msg := testMessage([]byte(`{"id":"order-000000","amount":1250,"currency":"CHF","items":3}`), []byte("order-1"),
		eh.Header{Key: "type", Value: []byte("OrderPlaced")})
	ev, _ := buildEvent(params(msg, classifyFailure(nil, eh.PhaseProcess, errors.New("order rejected")), "s", "svc", [2]string{"e", "i"}, time.Now(), eh.MessageInfo{}))
	b.Run("appendEvent", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 2048)
		for range b.N {
			if _, err := appendEvent(buf[:0], ev, &msg.Headers); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("avro.MarshalEvent", func(b *testing.B) {
		b.ReportAllocs()
		full := eventWithHeaders(ev, msg.Headers)
		for range b.N {
			if _, err := avro.MarshalEvent(full); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkBuildMPFE measures what the dead-letter path does per record before encoding (the
// job's initJob): the event's identity (a random event id, the idempotenceId) and its fields
// (stack trace, hash, description), for a flat error and for a wrapped one.
func BenchmarkBuildMPFE(b *testing.B) {
	msg := testMessage([]byte(`{"id":"order-000000","amount":1250,"currency":"CHF","items":3}`), []byte("order-1"),
		eh.Header{Key: "type", Value: []byte("OrderPlaced")})
	for name, err := range map[string]error{
		"flat":    errors.New("order rejected"),
		"wrapped": fmt.Errorf("book order 7: %w", errors.New("order rejected")),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			f := classifyFailure(nil, eh.PhaseProcess, err)
			d := &DeadLetterer{cfg: eh.DeadLetterConfig{System: "s", Service: "svc", GroupID: "g", Clock: time.Now}}
			for range b.N {
				d.initJob(&Job{}, msg, f, 0, nil)
			}
		})
	}
}

func TestEventIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 100_000 {
		id := newEventID()
		u, err := uuid.Parse(id)
		if err != nil || u.String() != id {
			t.Fatalf("id %q: %v", id, err)
		}
		if u.Version() != 4 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("id %q: version %d variant %v, want 4 and RFC 4122", id, u.Version(), u.Variant())
		}
		if seen[id] {
			t.Fatalf("id %q seen twice", id)
		}
		seen[id] = true
	}
}

// TestRedriveMetadataEntries: a tombstone is written as empty bytes with the value-null
// marker, and the in-place attempts are recorded; the original headers stay exact.
func TestRedriveMetadataEntries(t *testing.T) {
	hs := []eh.Header{{Key: "b", Value: []byte("1")}, {Key: "a", Value: nil}}
	for _, tc := range []struct {
		name      string
		value     []byte
		inPlace   int
		wantNull  bool
		wantTries string
	}{
		{"plain", []byte("v"), 0, false, ""},
		{"tombstone", nil, 0, true, ""},
		{"in-place attempts", []byte("v"), 3, false, "3"},
		{"tombstone after attempts", nil, 2, true, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := testMessage(tc.value, []byte("k"), hs...)
			p := params(msg, classifyFailure(nil, eh.PhaseProcess, errors.New("x")), "s", "svc", [2]string{"e", "i"}, time.Now(), eh.MessageInfo{})
			p.inPlaceAttempts = tc.inPlace
			ev, _ := buildEvent(p)
			b, err := appendEvent(nil, ev, &msg.Headers)
			if err != nil {
				t.Fatal(err)
			}
			back, err := avro.UnmarshalEvent(b)
			if err != nil {
				t.Fatal(err)
			}
			md := back.Payload.FailedMessageMetadata
			if tc.value == nil && (back.Payload.OriginalMessage == nil || len(back.Payload.OriginalMessage) != 0) {
				t.Errorf("tombstone originalMessage %q, want empty bytes", back.Payload.OriginalMessage)
			}
			null, ok := md.Headers[avro.ValueNullEntry]
			if ok != tc.wantNull || (ok && string(null) != "true") {
				t.Errorf("%s = %q (present %v), want present %v with \"true\"", avro.ValueNullEntry, null, ok, tc.wantNull)
			}
			tries, ok := md.Headers[avro.InPlaceAttemptsEntry]
			if string(tries) != tc.wantTries || ok != (tc.wantTries != "") {
				t.Errorf("%s = %q (present %v), want %q", avro.InPlaceAttemptsEntry, tries, ok, tc.wantTries)
			}
			got, err := md.OriginalHeaders()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].Name != "b" || string(got[0].Value) != "1" || got[1].Name != "a" || got[1].Value != nil {
				t.Errorf("original headers %q", got)
			}
		})
	}
}
