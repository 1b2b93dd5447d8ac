package intake

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/traceparent"
)

// tracerName is the instrumentation scope of the intake spans.
const tracerName = "github.com/redrive/redrive/intake"

// Attributes of the intake's batch span besides the messaging conventions.
const (
	attrTopics       = attribute.Key("redrive.intake.topics")
	attrPartitions   = attribute.Key("redrive.intake.partitions")
	attrUndecodable  = attribute.Key("redrive.intake.undecodable")
	attrLinksDropped = attribute.Key("redrive.intake.links_dropped")
)

// intakeTracer starts one span per polled batch (Config.TracerProvider). A nil *intakeTracer
// is tracing off.
type intakeTracer struct {
	tracer trace.Tracer
	group  string
}

func newIntakeTracer(tp trace.TracerProvider, group string) *intakeTracer {
	if tp == nil {
		return nil
	}
	return &intakeTracer{tracer: tp.Tracer(tracerName), group: group}
}

// startBatch starts the span of a polled batch of decoded records: its topic and partition
// (or, for a batch of several, their lists), its size, and a link to the trace of each record's
// original (the traceparent among the failed record's stored headers; for a record that did
// not decode, the traceparent of the record read), at most traceparent.MaxLinks. It returns
// nil when tracing is off; endBatch ends it.
func (t *intakeTracer) startBatch(recs []*record) trace.Span {
	if t == nil || len(recs) == 0 {
		return nil
	}
	var (
		topics     []string
		partitions []int64
		links      []trace.Link
		dropped    int
		bad        int
	)
	seenTopic := map[string]bool{}
	seenPart := map[int64]bool{}
	for _, r := range recs {
		if topic := deref(r.msg.TopicPartition.Topic); !seenTopic[topic] {
			seenTopic[topic] = true
			topics = append(topics, topic)
		}
		if p := int64(r.msg.TopicPartition.Partition); !seenPart[p] {
			seenPart[p] = true
			partitions = append(partitions, p)
		}
		if r.bad() {
			bad++
		}
		l, ok := recordLink(r)
		if !ok {
			continue
		}
		if len(links) == traceparent.MaxLinks {
			dropped++
			continue
		}
		links = append(links, l)
	}
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("intake"),
		semconv.MessagingBatchMessageCount(len(recs)),
		semconv.MessagingConsumerGroupName(t.group),
		attrUndecodable.Int(bad),
	}
	name := "intake"
	if len(topics) == 1 {
		name += " " + topics[0]
		attrs = append(attrs, semconv.MessagingDestinationName(topics[0]))
	} else {
		attrs = append(attrs, attrTopics.StringSlice(topics))
	}
	if len(partitions) == 1 && len(topics) == 1 {
		attrs = append(attrs, semconv.MessagingDestinationPartitionID(strconv.FormatInt(partitions[0], 10)))
	} else {
		attrs = append(attrs, attrPartitions.Int64Slice(partitions))
	}
	if dropped > 0 {
		attrs = append(attrs, attrLinksDropped.Int(dropped))
	}
	_, span := t.tracer.Start(context.Background(), name,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...), trace.WithLinks(links...))
	return span
}

// recordLink returns the link to r's original trace, if it has one.
func recordLink(r *record) (trace.Link, bool) {
	if !r.bad() {
		for _, h := range r.prep.Incoming().Headers {
			if h.Name == traceparent.Header {
				return traceparent.Link(h.Value)
			}
		}
	}
	for _, h := range r.msg.Headers {
		if h.Key == traceparent.Header {
			return traceparent.Link(h.Value)
		}
	}
	return trace.Link{}, false
}

// endBatch ends a batch's span once its offsets are committed, or marks it failed when the
// batch was left uncommitted.
func endBatch(span trace.Span, uncommitted bool) {
	if span == nil {
		return
	}
	if uncommitted {
		span.SetStatus(codes.Error, "batch left uncommitted: it is delivered again")
	}
	span.End()
}
