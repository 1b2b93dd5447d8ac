package resend

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

func TestSourceResendHeaders(t *testing.T) {
	t.Parallel()
	stored := []avro.Header{
		hdr("traceparent", []byte("00-1")), hdr("kafka_dlt-original-topic", []byte("orders")),
		hdr("__connect.errors.topic", []byte("orders")), hdr("__streams.errors.topic", []byte("orders")), hdr("dup", nil),
	}
	for format, want := range map[redrive.SourceFormat]string{
		redrive.SourceMPFE:    `traceparent="00-1" kafka_dlt-original-topic="orders" __connect.errors.topic="orders" __streams.errors.topic="orders" dup=<nil>`,
		redrive.SourceRaw:     `traceparent="00-1" kafka_dlt-original-topic="orders" __connect.errors.topic="orders" __streams.errors.topic="orders" dup=<nil>`,
		redrive.SourceSpring:  `traceparent="00-1" __connect.errors.topic="orders" __streams.errors.topic="orders" dup=<nil>`,
		redrive.SourceConnect: `traceparent="00-1" kafka_dlt-original-topic="orders" __streams.errors.topic="orders" dup=<nil>`,
		redrive.SourceStreams: `traceparent="00-1" kafka_dlt-original-topic="orders" __connect.errors.topic="orders" dup=<nil>`,
	} {
		want += ` jeap_eh_target_service="svc" jeap_eh_error_handling_service="redrive" redrive-origin="origin"`
		if got := headerList(SourceResendHeaders(format, stored, "svc", "redrive", "origin")); got != want {
			t.Errorf("%s:\n got %s\nwant %s", format, got, want)
		}
	}
}

// A failure read from a Spring dead-letter topic, dead-lettered twice, resends the original key
// and value byte for byte with the original headers in order and none of Spring's; a
// tombstone resends as a null value, an empty value as an empty one. Read back with a real
// consumer.
func TestResendForeignSourceAndTombstones(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	s := e.scheduler(t, nil)
	ctx := context.Background()

	be := func(n int64, size int) []byte {
		b := binary.BigEndian.AppendUint64(nil, uint64(n))
		return b[8-size:]
	}
	springSet := func(offset int64) []avro.Header {
		return []avro.Header{
			hdr("kafka_dlt-original-topic", []byte(topic)), hdr("kafka_dlt-original-partition", be(0, 4)),
			hdr("kafka_dlt-original-offset", be(offset, 8)), hdr("kafka_dlt-exception-fqcn", []byte("java.lang.IllegalStateException")),
		}
	}
	original := []avro.Header{hdr("traceparent", []byte("00-1")), hdr("nil", nil), hdr("traceparent", []byte("00-2"))}
	stored := append(append(append(append([]avro.Header{}, original...), springSet(5)...), hdr("late", []byte("x"))), springSet(9)...)
	wantHeaders := headerList(SourceResendHeaders(redrive.SourceMPFE, append(append([]avro.Header{}, original...), hdr("late", []byte("x"))),
		"order-service", "redrive-test", "orders/0/9"))

	due := func(int, time.Time) (time.Time, bool) { return e.clock.Now().Add(-time.Second), true }
	mk := func(offset int64, key, value []byte, null bool, headers []avro.Header, format redrive.SourceFormat) store.Incoming {
		id := uuid.NewString()
		return store.Incoming{
			Event: &avro.Event{
				Identity:  avro.Identity{EventID: id, IdempotenceID: id, Created: e.clock.Now()},
				Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
				Publisher: avro.Publisher{System: "spring-kafka", Service: "order-service"},
				References: avro.References{
					Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: topic, Partition: 0, Offset: offset},
					ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: avro.Temporary, Code: "IllegalStateException"},
				},
				Payload:            avro.Payload{OriginalMessage: value, OriginalKey: key, ErrorMessage: "boom"},
				DomainEventVersion: avro.DomainEventVersion,
			},
			Headers: headers, ValueNull: null,
			Source: redrive.Source{Format: format, Topic: "orders.DLT", Partition: 0, Offset: offset},
		}
	}
	key := []byte{0x00, 0xff, 'k'}
	value := []byte{0xfe, 0x00, 0x01}
	connect := append(append([]avro.Header{}, original...), hdr("__connect.errors.topic", []byte(topic)),
		hdr("__connect.errors.partition", []byte("0")), hdr("__connect.errors.exception.message", nil))
	streams := []avro.Header{hdr("__streams.errors.exception", []byte("java.lang.NullPointerException")), hdr("__streams.errors.message", nil)}
	raw := []avro.Header{hdr("kafka_dlt-original-topic", []byte("kept: raw records are copies")), hdr("x", []byte("1"))}
	if _, err := e.store.Ingest(ctx, []store.Incoming{
		mk(9, key, value, false, stored, redrive.SourceSpring),
		mk(10, []byte("gone"), nil, true, original, redrive.SourceSpring),
		mk(11, nil, []byte{}, false, nil, redrive.SourceMPFE),
		mk(12, []byte("connect"), []byte{0x80}, false, connect, redrive.SourceConnect),
		mk(13, []byte("streams"), []byte("s"), false, streams, redrive.SourceStreams),
		mk(14, []byte("raw"), []byte("r"), false, raw, redrive.SourceRaw),
	}, due); err != nil {
		t.Fatal(err)
	}
	st, err := s.round(ctx)
	if err != nil || st.resent != 6 {
		t.Fatalf("round: %+v, %v", st, err)
	}
	got := e.cluster.ConsumeN(t, topic, 6, 30*time.Second)
	byKey := map[string]int{}
	for i, m := range got {
		byKey[string(m.Key)] = i
	}
	m := got[byKey[string(key)]]
	if !bytes.Equal(m.Value, value) || headerList(m.Headers) != wantHeaders {
		t.Errorf("spring resend: value %x, headers\n got %s\nwant %s", m.Value, headerList(m.Headers), wantHeaders)
	}
	if tomb := got[byKey["gone"]]; tomb.Value != nil {
		t.Errorf("tombstone resent as %q, want a null value", tomb.Value)
	}
	if empty := got[byKey[""]]; empty.Value == nil || len(empty.Value) != 0 || empty.Key != nil {
		t.Errorf("empty value resent as %v (key %v), want empty and non-null with a null key", empty.Value, empty.Key)
	}
	resendHeaders := func(causing string, hs ...avro.Header) string {
		return headerList(SourceResendHeaders(redrive.SourceMPFE, hs, "order-service", "redrive-test", causing))
	}
	for k, want := range map[string]string{
		"connect": resendHeaders("orders/0/12", original...),
		"streams": resendHeaders("orders/0/13"),
		"raw":     resendHeaders("orders/0/14", raw...),
	} {
		m := got[byKey[k]]
		if h := headerList(m.Headers); h != want {
			t.Errorf("%s resend headers\n got %s\nwant %s", k, h, want)
		}
	}
	if m := got[byKey["connect"]]; !bytes.Equal(m.Value, []byte{0x80}) {
		t.Errorf("connect value %x", m.Value)
	}
}
