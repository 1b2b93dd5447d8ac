package jobs_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/internal/traceparent"
	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

// batchSpans returns the item counts of the ended spans named name, by the job id they carry.
func batchSpans(rec *tracetest.SpanRecorder, name string) map[string][]int64 {
	out := map[string][]int64{}
	for _, sp := range rec.Ended() {
		if sp.Name() != name {
			continue
		}
		var job string
		var items int64 = -1
		for _, a := range sp.Attributes() {
			switch a.Key {
			case attribute.Key("redrive.job.id"):
				job = a.Value.AsString()
			case attribute.Key("redrive.job.batch.items"):
				items = a.Value.AsInt64()
			}
		}
		out[job] = append(out[job], items)
	}
	return out
}

func sum(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// Every batch of a job is one span carrying the job, the action and the batch's size: a retry
// job of 10 failures in batches of 4 is three spans; a close job's batches are spans too.
func TestJobBatchSpans(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	pub := e.instance().Resender()
	e.run(jobs.Config{Publisher: pub, BatchSize: 4, TracerProvider: tp})

	ids := e.insertN(10, testkit.FailureRow{Topic: "orders"})
	retry := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}})
	e.waitJob(retry, time.Minute, "done", done)
	toClose := e.insertN(3, testkit.FailureRow{Topic: "orders", State: store.StatePermanent})
	closing := e.start(operator.JobRequest{Action: operator.Close, Reason: "obsolete", Selection: operator.Selection{IDs: toClose}})
	e.waitJob(closing, time.Minute, "done", done)

	retries := batchSpans(rec, "job retry batch")[retry.String()]
	if len(retries) != 3 || sum(retries) != 10 {
		t.Errorf("retry batch spans %v, want three of 10 items in all", retries)
	}
	closes := batchSpans(rec, "job close batch")[closing.String()]
	if len(closes) != 1 {
		t.Errorf("close batch spans %v, want one", closes)
	}
}

// The resend spans of a retry job's batch are children of the batch's span, in its trace, and
// link to the trace of each original's stored traceparent.
func TestJobResendSpansAreChildrenOfTheBatch(t *testing.T) {
	t.Parallel()
	const tp0 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	e := newEnv(t, "orders")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	sched, _ := e.instanceWith(func(c *resend.Config) { c.TracerProvider = tp })
	e.run(jobs.Config{Publisher: sched.Resender(), BatchSize: 2, TracerProvider: tp})

	ids := e.insertN(3, testkit.FailureRow{Topic: "orders", HeaderNames: []string{"traceparent"}, HeaderValues: [][]byte{[]byte(tp0)}})
	retry := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}})
	e.waitJob(retry, time.Minute, "done", done)

	batches := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var resends []sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		switch sp.Name() {
		case "job retry batch":
			batches[sp.SpanContext().SpanID()] = sp
		case "resend orders":
			resends = append(resends, sp)
		}
	}
	if len(batches) != 2 || len(resends) != 3 {
		t.Fatalf("%d batch spans and %d resend spans, want 2 and 3", len(batches), len(resends))
	}
	orig, _ := traceparent.Parse([]byte(tp0))
	perBatch := map[trace.SpanID]int{}
	for _, sp := range resends {
		b, ok := batches[sp.Parent().SpanID()]
		if !ok || sp.SpanContext().TraceID() != b.SpanContext().TraceID() {
			t.Errorf("resend span with parent %s in trace %s: not a child of a batch span", sp.Parent().SpanID(), sp.SpanContext().TraceID())
			continue
		}
		perBatch[b.SpanContext().SpanID()]++
		if l := sp.Links(); len(l) != 1 || l[0].SpanContext.TraceID() != orig.TraceID() || l[0].SpanContext.SpanID() != orig.SpanID() {
			t.Errorf("resend span links %+v, want one to %s", l, tp0)
		}
	}
	if len(perBatch) != 2 {
		t.Errorf("resend spans per batch %v, want spans under both batches", perBatch)
	}
}
