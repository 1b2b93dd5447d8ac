package resend

import (
	"context"
	"strconv"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/traceparent"
	"github.com/redrive/redrive/store"
)

// tracerName is the instrumentation scope of the resend spans.
const tracerName = "github.com/redrive/redrive/resend"

// Attributes of the resend spans besides the messaging conventions.
const (
	attrFailureID      = attribute.Key("redrive.failure.id")
	attrCausingMessage = attribute.Key("redrive.failure.causing_message")
)

// resendTracer starts one span per resent record (Config.TracerProvider). A nil
// *resendTracer is tracing off: it starts nothing and changes no header.
type resendTracer struct {
	tracer trace.Tracer
}

func newResendTracer(tp trace.TracerProvider) *resendTracer {
	if tp == nil {
		return nil
	}
	return &resendTracer{tracer: tp.Tracer(tracerName)}
}

// resendSpans are the spans of one sent batch, by item.
type resendSpans struct {
	t     *resendTracer
	spans []trace.Span
}

// batch returns the spans of a batch of n items; nothing when tracing is off.
func (t *resendTracer) batch(n int) resendSpans {
	if t == nil {
		return resendSpans{}
	}
	return resendSpans{t: t, spans: make([]trace.Span, n)}
}

// start starts item i's span as a child of the span of ctx, if any (a manual resend's API
// request, a job's batch), linked to the trace of the stored traceparent header of the
// original, and makes msg (the outgoing copy) carry the span's traceparent: it replaces the
// first traceparent header among msg's headers (dropping any later one) or adds one at the
// end. The stored headers (it.Headers) stay as they are.
func (s *resendSpans) start(ctx context.Context, i int, it *store.ResendItem, msg *kafka.Message) {
	if s.t == nil {
		return
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("resend"),
			semconv.MessagingDestinationName(it.Topic),
			attrFailureID.String(it.ID.String()),
			attrCausingMessage.String(it.CausingMessage),
		),
	}
	if p := msg.TopicPartition.Partition; p != kafka.PartitionAny {
		opts = append(opts, trace.WithAttributes(semconv.MessagingDestinationPartitionID(strconv.Itoa(int(p)))))
	}
	for _, h := range it.Headers {
		if h.Name == traceparent.Header {
			if l, ok := traceparent.Link(h.Value); ok {
				opts = append(opts, trace.WithLinks(l))
			}
			break
		}
	}
	_, span := s.t.tracer.Start(ctx, "resend "+it.Topic, opts...)
	s.spans[i] = span
	msg.Headers = withTraceparent(msg.Headers, traceparent.Format(span.SpanContext()))
}

// rootContext returns ctx without its span: the resends sent under it start traces of their
// own (linked to their originals), as the scheduler's automatic resends do.
func rootContext(ctx context.Context) context.Context {
	return trace.ContextWithSpanContext(ctx, trace.SpanContext{})
}

// withTraceparent returns hs with value as its one traceparent header: in the place of the
// first one, or added at the end. A nil value (no valid span) leaves hs as it is.
func withTraceparent(hs []kafka.Header, value []byte) []kafka.Header {
	if value == nil {
		return hs
	}
	found := false
	out := hs[:0]
	for _, h := range hs {
		if h.Key == traceparent.Header {
			if found {
				continue
			}
			found = true
			h.Value = value
		}
		out = append(out, h)
	}
	if !found {
		out = append(out, kafka.Header{Key: traceparent.Header, Value: value})
	}
	return out
}

// end ends item i's span with the outcome of its send.
func (s *resendSpans) end(i int, err error) {
	if s.t == nil || s.spans[i] == nil {
		return
	}
	span := s.spans[i]
	s.spans[i] = nil
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// endRest ends the spans that end did not, with errs.
func (s *resendSpans) endRest(errs []error) {
	if s.t == nil {
		return
	}
	for i := range s.spans {
		s.end(i, errs[i])
	}
}
