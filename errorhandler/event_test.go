package errorhandler

import (
	"bufio"
	"bytes"
	crand "crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redrive/redrive/avro"
)

func testMessage(value, key []byte, hs ...kafka.Header) *kafka.Message {
	topic := "orders"
	return &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 7, Offset: 1 << 40},
		Key:            key,
		Value:          value,
		Headers:        hs,
	}
}

func TestEventEncodingMatchesTheAvroPackage(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	cases := []struct {
		name string
		msg  *kafka.Message
		info MessageInfo
		err  error
	}{
		{"minimal", testMessage([]byte("v"), nil), MessageInfo{}, errors.New("boom")},
		{"tombstone with empty key", testMessage(nil, []byte{}), MessageInfo{}, errors.New("tombstone failed")},
		{"unicode and binary", testMessage([]byte{0, 1, 2, 0xff}, []byte("ключ")), MessageInfo{ID: "id-1", Type: "Order", Version: "2", System: "shop", Service: "web", IdempotenceID: "i-1", Created: now}, fmt.Errorf("wrap: %w", errors.New("ünïcode"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, key := buildEvent(tc.msg, classifyFailure(nil, PhaseProcess, tc.err), "sys", "svc", [2]string{"e-1", "i-2"}, now, tc.info)
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
	hs := []kafka.Header{
		{Key: "b", Value: []byte("1")},
		{Key: "a", Value: nil},
		{Key: "b", Value: []byte("2")},
		{Key: "c", Value: []byte{}},
		{Key: avro.HeadersEntry, Value: []byte("x")},
	}
	ev, _ := buildEvent(testMessage([]byte("v"), nil, hs...), classifyFailure(nil, PhaseDecode, errors.New("x")), "s", "s", [2]string{"a", "b"}, time.Now(), MessageInfo{})
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
		m := testMessage(value, key, kafka.Header{Key: hname, Value: hvalue})
		ev, _ := buildEvent(m, classifyFailure(nil, PhaseProcess, errors.New(msg)), "s", "svc", [2]string{"e", "i"}, time.UnixMilli(1), MessageInfo{ID: id})
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
	ev, _ := buildEvent(testMessage([]byte("v"), nil), classifyFailure(nil, PhaseProcess, errors.New(strings.Repeat("x", 10000))), "s", "s", [2]string{"a", "b"}, time.Now(), MessageInfo{})
	if n := len(*ev.Payload.StackTrace); n != avro.MaxStackTrace+3 {
		t.Errorf("stack trace of %d bytes, want %d", n, avro.MaxStackTrace+3)
	}
}

type codedError struct{ code string }

func (e *codedError) Error() string { return "coded " + e.code }

func TestStackTraceHash(t *testing.T) {
	h := func(phase Phase, err error) string { return stackTraceHash(classifyFailure(nil, phase, err)) }
	base := h(PhaseProcess, fmt.Errorf("order 1: %w", &codedError{"a"}))
	if base != h(PhaseProcess, fmt.Errorf("order 2 of customer 9: %w", &codedError{"b"})) {
		t.Error("same error types with other messages hash differently")
	}
	for name, err := range map[string]error{
		"other type":   fmt.Errorf("order 1: %w", errors.New("x")),
		"unwrapped":    &codedError{"a"},
		"classified":   fmt.Errorf("order 1: %w", Permanent(&codedError{"a"}, "X")),
		"joined":       errors.Join(&codedError{"a"}, errors.New("y")),
		"decode error": &DecodeError{Part: PartValue, Err: &codedError{"a"}},
	} {
		if h(PhaseProcess, err) == base {
			t.Errorf("%s: same hash as the base error", name)
		}
	}
	if h(PhaseDecode, &DecodeError{Part: PartKey, Err: errors.New("x")}) == h(PhaseDecode, &DecodeError{Part: PartValue, Err: errors.New("x")}) {
		t.Error("key and value decode failures share a hash")
	}
	st := stackTrace(fmt.Errorf("outer: %w", errors.Join(errors.New("a\nb"), &codedError{"c"})))
	for _, want := range []string{"*fmt.wrapError: outer", "caused by *errors.joinError", `[0] *errors.errorString: a\nb`, "[1] *errorhandler.codedError: coded c"} {
		if !strings.Contains(st, want) {
			t.Errorf("stack trace lacks %q:\n%s", want, st)
		}
	}
}

func TestDefaultClassification(t *testing.T) {
	pe := &PanicError{Value: "x"}
	for _, tc := range []struct {
		phase Phase
		err   error
		want  Classification
	}{
		{PhaseDecode, errors.New("x"), Classification{avro.CodeDeserializationFailed, avro.Permanent}},
		{PhaseProcess, errors.New("x"), Classification{avro.CodeUnknownException, avro.Unknown}},
		{PhaseProcess, pe, Classification{CodePanic, avro.Unknown}},
		{PhaseProcess, fmt.Errorf("a: %w", fmt.Errorf("b: %w", Temporary(errors.New("x"), "T1"))), Classification{"T1", avro.Temporary}},
		{PhaseDecode, Permanent(errors.New("x"), "WRONG_EVENT_TYPE"), Classification{"WRONG_EVENT_TYPE", avro.Permanent}},
		{PhaseProcess, Classify(errors.New("x"), "", "bogus"), Classification{avro.CodeUnknownException, avro.Unknown}},
		{PhaseProcess, &PanicError{Value: Temporary(errors.New("x"), "T2")}, Classification{"T2", avro.Temporary}},
	} {
		if got := DefaultClassification(tc.phase, tc.err); got != tc.want {
			t.Errorf("DefaultClassification(%s, %v) = %+v, want %+v", tc.phase, tc.err, got, tc.want)
		}
	}
	if Temporary(nil, "x") != nil || Permanent(nil, "x") != nil {
		t.Error("classifying nil must give nil")
	}
	override := func(_ Phase, _ error, def Classification) Classification {
		return Classification{Code: "MINE", Temporality: def.Temporality}
	}
	if f := classifyFailure(override, PhaseDecode, errors.New("x")); f.class != (Classification{"MINE", avro.Permanent}) {
		t.Errorf("classifier override gave %+v", f.class)
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

func TestConfigValidation(t *testing.T) {
	ok := func() Config[[]byte, string] {
		return Config[[]byte, string]{
			Brokers: "localhost:1", GroupID: "g", Topics: []string{"t"}, System: "s", Service: "svc",
			ValueDecoder: stringDecoder(), Handler: newRecorder(), Metrics: prometheus.NewRegistry(),
		}
	}
	if _, err := New(ok()); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, mutate := range map[string]func(*Config[[]byte, string]){
		"no brokers":           func(c *Config[[]byte, string]) { c.Brokers = "" },
		"no group":             func(c *Config[[]byte, string]) { c.GroupID = "" },
		"no topics":            func(c *Config[[]byte, string]) { c.Topics = nil },
		"no service":           func(c *Config[[]byte, string]) { c.Service = "" },
		"no decoder":           func(c *Config[[]byte, string]) { c.ValueDecoder = nil },
		"no handler":           func(c *Config[[]byte, string]) { c.Handler = nil },
		"dead letter no topic": func(c *Config[[]byte, string]) { c.ProcessPolicy = DeadLetter },
		"bad policy":           func(c *Config[[]byte, string]) { c.DecodePolicy = Policy(9) },
		"auto commit":          func(c *Config[[]byte, string]) { c.ConsumerConfig = kafka.ConfigMap{"enable.auto.commit": true} },
		"weak acks": func(c *Config[[]byte, string]) {
			c.DeadLetter = DeadLetterConfig{ErrorTopic: "e", ProducerConfig: kafka.ConfigMap{"acks": 1}}
		},
		"no idempotence": func(c *Config[[]byte, string]) {
			c.DeadLetter = DeadLetterConfig{ErrorTopic: "e", ProducerConfig: kafka.ConfigMap{"enable.idempotence": false}}
		},
		"negative": func(c *Config[[]byte, string]) { c.CommitInterval = -1 },
	} {
		cfg := ok()
		mutate(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "invalid config") {
			t.Errorf("%s: New = %v, want an invalid config error", name, err)
		}
	}
	if _, err := NewDeadLetterer(DeadLetterConfig{}); err == nil || !strings.Contains(err.Error(), "ErrorTopic is empty") {
		t.Errorf("NewDeadLetterer with an empty config: %v", err)
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
		kafka.Header{Key: "type", Value: []byte("OrderPlaced")})
	ev, _ := buildEvent(msg, classifyFailure(nil, PhaseProcess, errors.New("order rejected")), "s", "svc", [2]string{"e", "i"}, time.Now(), MessageInfo{})
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

func TestNewIDs(t *testing.T) {
	d := &DeadLetterer{ids: &lockedReader{r: bufio.NewReaderSize(crand.Reader, 4096)}}
	seen := map[string]bool{}
	for range 100 {
		for _, id := range d.newIDs() {
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
}
