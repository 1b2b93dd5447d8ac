package engine

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	eh "github.com/redrive/redrive/errorhandler"
)

// Without a TracerProvider in the config, the middleware uses OpenTelemetry's global one: no
// span (nothing kept on the job) until the application sets one, a span per dead-lettered
// record after. Not parallel: it sets the global TracerProvider.
func TestDeadLetterSpansFollowTheGlobalTracerProvider(t *testing.T) {
	prod := &ackProducer{}
	d, err := NewDeadLetterer(eh.DeadLetterConfig{
		ErrorTopic: "e", System: "s", Service: "s", GroupID: "g", Metrics: prometheus.NewRegistry(),
	}, func(report func(*Job, error)) (Producer, error) { prod.report = report; return prod, nil })
	if err != nil {
		t.Fatal(err)
	}
	const topic = "global-tracer-topic"
	msg := &eh.Message{Topic: topic, Offset: 1, Value: []byte("v"),
		Headers: []eh.Header{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}

	// Off: the job keeps no span.
	var j Job
	d.initJob(&j, msg, classifyFailure(nil, eh.PhaseProcess, errors.New("boom")), 0, nil)
	d.startSpan(&j)
	if j.span != nil {
		t.Fatal("a span is kept with no TracerProvider set")
	}

	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	del := d.Publish(t.Context(), msg, errors.New("boom"))
	if err := del.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sp := range rec.Ended() {
		if sp.Name() == "dead-letter "+topic {
			n++
			if sp.Parent().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Errorf("parent %v", sp.Parent())
			}
		}
	}
	if n != 1 {
		t.Errorf("%d spans after otel.SetTracerProvider, want 1", n)
	}
	if err := d.Close(t.Context()); err != nil {
		t.Error(err)
	}
}

// BenchmarkStartSpanOff is the cost of the dead-letter span for an application that does not
// use OpenTelemetry.
func BenchmarkStartSpanOff(b *testing.B) {
	d := &DeadLetterer{tracer: newTracer(eh.DeadLetterConfig{})}
	msg := eh.Message{Topic: "t", Headers: []eh.Header{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}
	j := &Job{msg: msg}
	b.ReportAllocs()
	for b.Loop() {
		d.startSpan(j)
		endSpan(j, nil)
	}
}
