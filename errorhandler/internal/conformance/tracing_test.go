package conformance

import (
	"context"
	"errors"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	eh "github.com/redrive/redrive/errorhandler"
)

// With a TracerProvider in the config, both adapters trace every dead-lettered record with a
// producer span that is a child of the record's traceparent (a root span without one) and
// ends when the error topic acknowledged the event.
func TestDeadLetterSpans(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		rec := tracetest.NewSpanRecorder()
		dl, err := e.newDeadLetterer(eh.DeadLetterConfig{
			ErrorTopic: testErrTopic, System: "test-system", Service: "test-service", GroupID: "traced",
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
			Metrics:        prometheus.NewRegistry(), Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer dl.Close(context.Background())

		const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		topic := testTopic
		traced := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0, Offset: 7},
			Value: []byte("v"), Headers: []kafka.Header{{Key: "traceparent", Value: []byte(parent)}}}
		untraced := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0, Offset: 8}, Value: []byte("v")}
		for _, m := range []*kafka.Message{traced, untraced} {
			if err := dl.publish(context.Background(), m, errors.New("handler failed")).Wait(context.Background()); err != nil {
				t.Fatalf("delivery: %v", err)
			}
		}
		spans := rec.Ended()
		if len(spans) != 2 {
			t.Fatalf("%d spans, want 2", len(spans))
		}
		for i, sp := range spans {
			if sp.Name() != "dead-letter "+testTopic || sp.SpanKind() != trace.SpanKindProducer || sp.Status().Code != 0 {
				t.Errorf("span %d: %q kind %v status %v", i, sp.Name(), sp.SpanKind(), sp.Status())
			}
			attrs := map[string]string{}
			for _, kv := range sp.Attributes() {
				attrs[string(kv.Key)] = kv.Value.Emit()
			}
			if attrs["messaging.destination.name"] != testErrTopic || attrs["redrive.record.topic"] != testTopic ||
				attrs["redrive.failure.phase"] != "process" || attrs["redrive.event.id"] == "" {
				t.Errorf("span %d attributes %v", i, attrs)
			}
		}
		if p := spans[0].Parent(); p.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || p.SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("traced span's parent %v, want the record's traceparent", p)
		}
		if spans[0].SpanContext().TraceID() != spans[0].Parent().TraceID() {
			t.Errorf("traced span is not in the record's trace")
		}
		if spans[1].Parent().IsValid() {
			t.Errorf("untraced span has a parent %v", spans[1].Parent())
		}
	})
}
