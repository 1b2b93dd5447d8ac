package intake

import (
	"errors"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/traceparent"
)

func spanAttr(sp sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, a := range sp.Attributes() {
		if a.Key == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// The intake traces each polled batch with a consumer span that names the topic, partition and
// count, and links to each record's original trace: the traceparent among the stored headers
// of an event, or the traceparent of a record that did not decode.
func TestIntakeBatchSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, func(c *Config) { c.TracerProvider = tp; c.BatchWait = 200e6 })
	parents := []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-00",
	}
	var msgs []*kafka.Message
	topic := errorTopic
	for i := range 3 {
		ev := event(avro.Temporary)
		ev.Payload.FailedMessageMetadata = &avro.Metadata{}
		hs := []avro.Header{{Name: "x", Value: []byte("y")}}
		if i < 2 {
			hs = append(hs, avro.Header{Name: traceparent.Header, Value: []byte(parents[i])})
		}
		if err := ev.Payload.FailedMessageMetadata.SetHeaders(hs); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: e.encode(ev)})
	}
	msgs = append(msgs, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte("not an event"),
		Headers: []kafka.Header{{Key: traceparent.Header, Value: []byte(parents[2])}}})
	e.kafka.Produce(t, msgs...)
	e.start()
	count := func() int {
		n := 0
		for _, sp := range rec.Ended() {
			if v, ok := spanAttr(sp, semconv.MessagingBatchMessageCountKey); ok {
				n += int(v.AsInt64())
			}
		}
		return n
	}
	e.waitFor("batch spans of 4 records", func() bool { return e.rows() == 3 && e.committedAll() && count() == 4 })

	linked := map[trace.TraceID]bool{}
	for _, sp := range rec.Ended() {
		if sp.Name() != "intake "+errorTopic || sp.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("span %q kind %v", sp.Name(), sp.SpanKind())
		}
		if v, _ := spanAttr(sp, semconv.MessagingDestinationNameKey); v.AsString() != errorTopic {
			t.Errorf("topic attribute %q", v.AsString())
		}
		if v, _ := spanAttr(sp, semconv.MessagingDestinationPartitionIDKey); v.AsString() != "0" {
			t.Errorf("partition attribute %q", v.AsString())
		}
		if v, _ := spanAttr(sp, semconv.MessagingConsumerGroupNameKey); v.AsString() != e.group {
			t.Errorf("group attribute %q", v.AsString())
		}
		for _, l := range sp.Links() {
			linked[l.SpanContext.TraceID()] = true
		}
	}
	for _, p := range parents {
		sc, _ := traceparent.Parse([]byte(p))
		if !linked[sc.TraceID()] {
			t.Errorf("no link to %s", p)
		}
	}
	if len(linked) != 3 {
		t.Errorf("%d linked traces, want 3", len(linked))
	}
}

// At most traceparent.MaxLinks links; the rest are counted.
func TestIntakeBatchSpanCapsLinks(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tr := newIntakeTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), "g")
	topic := "errors"
	recs := make([]*record, traceparent.MaxLinks+5)
	for i := range recs {
		recs[i] = &record{msg: &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(i % 2)},
			Headers: []kafka.Header{{Key: traceparent.Header, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}}
		recs[i].reject("decode", errBadTest)
	}
	endBatch(tr.startBatch(recs), false)
	sp := rec.Ended()[0]
	if len(sp.Links()) != traceparent.MaxLinks {
		t.Errorf("%d links", len(sp.Links()))
	}
	if v, _ := spanAttr(sp, attrLinksDropped); v.AsInt64() != 5 {
		t.Errorf("links dropped %d", v.AsInt64())
	}
	if v, _ := spanAttr(sp, attrPartitions); len(v.AsInt64Slice()) != 2 {
		t.Errorf("partitions %v", v.AsInt64Slice())
	}
	if v, _ := spanAttr(sp, attrUndecodable); v.AsInt64() != int64(len(recs)) {
		t.Errorf("undecodable %d", v.AsInt64())
	}
	if (*intakeTracer)(nil).startBatch(recs) != nil {
		t.Error("a nil tracer started a span")
	}
}

var errBadTest = errors.New("bad test record")
