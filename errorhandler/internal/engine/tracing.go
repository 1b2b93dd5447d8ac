package engine

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/internal/traceparent"
)

// tracerName is the instrumentation scope of the middleware's spans.
const tracerName = "github.com/redrive/redrive/errorhandler"

// Attributes of a dead-letter span besides the messaging conventions.
const (
	attrSourceTopic     = attribute.Key("redrive.record.topic")
	attrSourcePartition = attribute.Key("redrive.record.partition")
	attrSourceOffset    = attribute.Key("redrive.record.offset")
	attrPhase           = attribute.Key("redrive.failure.phase")
	attrTemporality     = attribute.Key("redrive.failure.temporality")
	attrEventID         = attribute.Key("redrive.event.id")
	attrAttempts        = attribute.Key("redrive.dead_letter.attempts")
)

// startOptions start every dead-letter span (built once: a no-op Start allocates less).
var startOptions = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}

// newTracer returns the tracer of cfg.TracerProvider, else of OpenTelemetry's global
// TracerProvider: its spans are no-ops until the application sets one.
func newTracer(cfg errorhandler.DeadLetterConfig) trace.Tracer {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// startSpan starts the span of j's MPFE, a child of the failed record's traceparent (when it
// has a valid one), and keeps it in j when it records: a no-op tracer costs a header lookup.
func (d *DeadLetterer) startSpan(j *Job) {
	ctx := context.Background()
	if v, ok := j.msg.HeaderValue(traceparent.Header); ok {
		if sc, ok := traceparent.Parse(v); ok {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	_, span := d.tracer.Start(ctx, "dead-letter", startOptions...)
	if !span.IsRecording() {
		return
	}
	span.SetName("dead-letter " + j.msg.Topic)
	span.SetAttributes(
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName("dead-letter"),
		semconv.MessagingDestinationName(d.cfg.ErrorTopic),
		semconv.MessagingConsumerGroupName(d.cfg.GroupID),
		attrSourceTopic.String(j.msg.Topic),
		attrSourcePartition.String(strconv.Itoa(int(j.msg.Partition))),
		attrSourceOffset.Int64(j.msg.Offset),
		attrPhase.String(string(j.f.phase)),
		attrTemporality.String(string(j.f.class.Temporality)),
		semconv.ErrorTypeKey.String(j.f.class.Code),
		attrEventID.String(j.ev.Identity.EventID),
	)
	j.span = span
}

// endSpan ends j's span with the outcome of its MPFE: nil when the error topic acknowledged it.
func endSpan(j *Job, err error) {
	span := j.span
	if span == nil {
		return
	}
	j.span = nil
	span.SetAttributes(attrAttempts.Int(j.attempts + 1))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "dead-letter event not acknowledged")
	}
	span.End()
}
