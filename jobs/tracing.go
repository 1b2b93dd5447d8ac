package jobs

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/store"
)

// tracerName is the instrumentation scope of the job spans.
const tracerName = "github.com/redrive/redrive/jobs"

// Attributes of a job batch's span.
const (
	attrJobID   = attribute.Key("redrive.job.id")
	attrAction  = attribute.Key("redrive.job.action")
	attrClaimID = attribute.Key("redrive.job.claim_id")
	attrItems   = attribute.Key("redrive.job.batch.items")
	attrSkipped = attribute.Key("redrive.job.batch.skipped")
	attrLast    = attribute.Key("redrive.job.batch.last_seq")
)

// jobTracer starts one span per batch of a job (Config.TracerProvider). A nil *jobTracer is
// tracing off.
type jobTracer struct {
	tracer trace.Tracer
}

func newJobTracer(tp trace.TracerProvider) *jobTracer {
	if tp == nil {
		return nil
	}
	return &jobTracer{tracer: tp.Tracer(tracerName)}
}

// batchSpan is the span of one batch; the zero value is tracing off.
type batchSpan struct {
	span trace.Span
}

// context returns ctx carrying the batch's span, the parent of the spans of its resends.
func (s batchSpan) context(ctx context.Context) context.Context {
	if s.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, s.span)
}

// start starts the span of a claimed batch of a retry or resend_to job.
func (t *jobTracer) start(job *store.Job, b *store.JobBatch) batchSpan {
	if t == nil {
		return batchSpan{}
	}
	return t.startAt(job, b, time.Now())
}

// startAt starts the span of claimed batch b at the given time.
func (t *jobTracer) startAt(job *store.Job, b *store.JobBatch, at time.Time) batchSpan {
	_, span := t.tracer.Start(context.Background(), "job "+job.Action+" batch", trace.WithTimestamp(at),
		trace.WithAttributes(attrJobID.String(job.ID.String()), attrAction.String(job.Action)))
	span.SetAttributes(attrLast.Int64(b.Last))
	span.SetAttributes(attrClaimID.Int64(b.ClaimID), attrItems.Int(len(b.Items)), attrSkipped.Int(b.Skipped),
		semconv.MessagingBatchMessageCount(len(b.Items)))
	return batchSpan{span: span}
}

// closed records the span of a close job's batch, which is claimed and closed in one step
// that began at start, with its outcome err. A step that found nothing to close has none.
func (t *jobTracer) closed(job *store.Job, start time.Time, b *store.JobBatch, err error) {
	if t == nil || (err == nil && (b == nil || b.Last == 0)) {
		return
	}
	_, span := t.tracer.Start(context.Background(), "job "+job.Action+" batch", trace.WithTimestamp(start),
		trace.WithAttributes(attrJobID.String(job.ID.String()), attrAction.String(job.Action)))
	s := batchSpan{span: span}
	if b != nil {
		span.SetAttributes(attrSkipped.Int(b.Skipped), attrLast.Int64(b.Last))
	}
	if err != nil {
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// end ends the span; *ok false marks the batch failed (it stays pending for a later claim).
func (s batchSpan) end(ok *bool) {
	if s.span == nil {
		return
	}
	if !*ok {
		s.span.SetStatus(codes.Error, "batch not settled: its items stay pending")
	}
	s.span.End()
}
