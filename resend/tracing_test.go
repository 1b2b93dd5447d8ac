package resend

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/traceparent"
)

const (
	origTraceparent  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	olderTraceparent = "00-11111111111111111111111111111111-2222222222222222-01"
)

// byOrigin returns the consumed records by their redrive-origin header.
func byOrigin(t *testing.T, msgs []*kafka.Message) map[string]*kafka.Message {
	t.Helper()
	out := map[string]*kafka.Message{}
	for _, m := range msgs {
		for _, h := range m.Headers {
			if h.Key == avro.HeaderOrigin {
				out[string(h.Value)] = m
			}
		}
	}
	return out
}

// With tracing on, every resent record has a producer span linked to the trace of the
// original's stored traceparent, and the record goes out with that span's traceparent in the
// place of the stored one (or added at the end): the rest of the record is byte for byte the
// stored original, and the stored headers stay unchanged.
func TestResendSpansAndTraceparent(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 2})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := e.scheduler(t, func(c *Config) { c.TracerProvider = tp })

	traced := []avro.Header{
		hdr("a", []byte("1")),
		hdr(traceparent.Header, []byte(origTraceparent)),
		hdr("tracestate", []byte("vendor=x")),
		hdr(traceparent.Header, []byte(olderTraceparent)),
		hdr("b", nil),
	}
	untraced := []avro.Header{hdr("a", []byte("1"))}
	idTraced := e.insertFailure(t, row{Topic: topic, Headers: traced, Causing: "traced", Key: []byte("k1")})
	idUntraced := e.insertFailure(t, row{Topic: topic, Headers: untraced, Causing: "untraced", Key: []byte("k2")})

	if st, err := s.round(context.Background()); err != nil || st.resent != 2 {
		t.Fatalf("round: %+v, %v", st, err)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	byFailure := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		if sp.Name() != "resend "+topic || sp.SpanKind() != trace.SpanKindProducer {
			t.Errorf("span %q kind %v", sp.Name(), sp.SpanKind())
		}
		if sp.Parent().IsValid() {
			t.Errorf("span %q has a parent", sp.Name())
		}
		for _, a := range sp.Attributes() {
			if a.Key == attrFailureID {
				byFailure[a.Value.AsString()] = sp
			}
		}
	}
	spTraced, spUntraced := byFailure[idTraced.String()], byFailure[idUntraced.String()]
	if spTraced == nil || spUntraced == nil {
		t.Fatalf("spans by failure id: %v", byFailure)
	}
	orig, _ := traceparent.Parse([]byte(origTraceparent))
	if l := spTraced.Links(); len(l) != 1 || l[0].SpanContext.TraceID() != orig.TraceID() || l[0].SpanContext.SpanID() != orig.SpanID() {
		t.Errorf("traced span links %+v, want one to %s", spTraced.Links(), origTraceparent)
	}
	if spTraced.SpanContext().TraceID() == orig.TraceID() {
		t.Errorf("the resend span is in the original's trace: it should link to it")
	}
	if l := spUntraced.Links(); len(l) != 0 {
		t.Errorf("untraced span links %+v", l)
	}

	got := byOrigin(t, e.cluster.ConsumeN(t, topic, 2, 30*time.Second))
	mine := string(traceparent.Format(spTraced.SpanContext()))
	wantTraced := ResendHeaders([]avro.Header{
		hdr("a", []byte("1")), hdr(traceparent.Header, []byte(mine)), hdr("tracestate", []byte("vendor=x")), hdr("b", nil),
	}, "order-service", "redrive-test", "traced")
	if h, want := headerList(got["traced"].Headers), headerList(wantTraced); h != want {
		t.Errorf("traced record's headers\n got %s\nwant %s", h, want)
	}
	wantUntraced := append(ResendHeaders(untraced, "order-service", "redrive-test", "untraced"),
		kafka.Header{Key: traceparent.Header, Value: traceparent.Format(spUntraced.SpanContext())})
	if h, want := headerList(got["untraced"].Headers), headerList(wantUntraced); h != want {
		t.Errorf("untraced record's headers\n got %s\nwant %s", h, want)
	}

	for id, want := range map[uuid.UUID][]avro.Header{idTraced: traced, idUntraced: untraced} {
		var names []string
		var values [][]byte
		if err := e.pool.QueryRow(context.Background(), `SELECT header_names, header_values FROM failures WHERE id = $1`, id).Scan(&names, &values); err != nil {
			t.Fatal(err)
		}
		got := make([]kafka.Header, len(names))
		for i := range names {
			got[i] = kafka.Header{Key: names[i], Value: values[i]}
		}
		if headerList(got) != headerList(storedAsKafka(want)) {
			t.Errorf("stored headers of %s changed: %s", id, headerList(got))
		}
	}
}

// A manual resend's span is a child of the caller's span (the API request's), in its trace,
// and still links to the original's trace; the scheduler's own resends start traces of their
// own even when the context they run under carries a span.
func TestResendSpanParentAndLink(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := e.scheduler(t, func(c *Config) { c.TracerProvider = tp })
	orig, _ := traceparent.Parse([]byte(origTraceparent))
	headers := []avro.Header{hdr(traceparent.Header, []byte(origTraceparent))}
	spanOf := func(id uuid.UUID) sdktrace.ReadOnlySpan {
		t.Helper()
		for _, sp := range rec.Ended() {
			for _, a := range sp.Attributes() {
				if a.Key == attrFailureID && a.Value.AsString() == id.String() {
					return sp
				}
			}
		}
		t.Fatalf("no span of failure %s", id)
		return nil
	}
	linksToOriginal := func(sp sdktrace.ReadOnlySpan) bool {
		l := sp.Links()
		return len(l) == 1 && l[0].SpanContext.TraceID() == orig.TraceID() && l[0].SpanContext.SpanID() == orig.SpanID()
	}

	manual := e.insertFailure(t, row{Topic: topic, State: redrive.StatePermanent, Temporality: "PERMANENT", Headers: headers, Causing: "manual"})
	ctx, request := tp.Tracer("test").Start(context.Background(), "POST /api/v1/failures/{id}/retry")
	res, err := s.Resender().ResendIDs(ctx, []uuid.UUID{manual}, ManualRequest{Principal: "alice"})
	request.End()
	if err != nil || res.Items[0].Outcome != redrive.OutcomeResent {
		t.Fatalf("ResendIDs = %+v, %v", res, err)
	}
	sp := spanOf(manual)
	if sp.Parent().SpanID() != request.SpanContext().SpanID() || sp.SpanContext().TraceID() != request.SpanContext().TraceID() {
		t.Errorf("manual resend span: parent %s in trace %s, want parent %s in trace %s", sp.Parent().SpanID(),
			sp.SpanContext().TraceID(), request.SpanContext().SpanID(), request.SpanContext().TraceID())
	}
	if !linksToOriginal(sp) {
		t.Errorf("manual resend span links %+v, want one to %s", sp.Links(), origTraceparent)
	}

	auto := e.insertFailure(t, row{Topic: topic, Headers: headers, Causing: "auto"})
	ctx, loop := tp.Tracer("test").Start(context.Background(), "scheduler")
	if st, err := s.round(ctx); err != nil || st.resent != 1 {
		t.Fatalf("round: %+v, %v", st, err)
	}
	loop.End()
	sp = spanOf(auto)
	if sp.Parent().IsValid() || sp.SpanContext().TraceID() == loop.SpanContext().TraceID() {
		t.Errorf("automatic resend span has parent %s in trace %s: want a root", sp.Parent().SpanID(), sp.SpanContext().TraceID())
	}
	if !linksToOriginal(sp) {
		t.Errorf("automatic resend span links %+v, want one to %s", sp.Links(), origTraceparent)
	}
}

// With tracing off (no TracerProvider), a resend adds no traceparent and keeps the stored one.
func TestResendWithoutTracingKeepsHeaders(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	s := e.scheduler(t, nil)
	stored := []avro.Header{hdr(traceparent.Header, []byte(origTraceparent))}
	e.insertFailure(t, row{Topic: topic, Headers: stored, Causing: "traced"})
	e.insertFailure(t, row{Topic: topic, Causing: "untraced"})
	if st, err := s.round(context.Background()); err != nil || st.resent != 2 {
		t.Fatalf("round: %+v, %v", st, err)
	}
	got := byOrigin(t, e.cluster.ConsumeN(t, topic, 2, 30*time.Second))
	if h, want := headerList(got["traced"].Headers), headerList(ResendHeaders(stored, "order-service", "redrive-test", "traced")); h != want {
		t.Errorf("headers\n got %s\nwant %s", h, want)
	}
	if h, want := headerList(got["untraced"].Headers), headerList(ResendHeaders(nil, "order-service", "redrive-test", "untraced")); h != want {
		t.Errorf("headers\n got %s\nwant %s", h, want)
	}
}

func TestWithTraceparent(t *testing.T) {
	t.Parallel()
	h := func(k, v string) kafka.Header { return kafka.Header{Key: k, Value: []byte(v)} }
	v := []byte("new")
	for _, tc := range []struct {
		in   []kafka.Header
		want string
	}{
		{nil, `traceparent="new"`},
		{[]kafka.Header{h("a", "1")}, `a="1" traceparent="new"`},
		{[]kafka.Header{h("traceparent", "x"), h("a", "1"), h("traceparent", "y")}, `traceparent="new" a="1"`},
	} {
		in := headerList(tc.in)
		if got := headerList(withTraceparent(tc.in, v)); got != tc.want {
			t.Errorf("withTraceparent(%s) = %s, want %s", in, got, tc.want)
		}
	}
	if got := headerList(withTraceparent([]kafka.Header{h("traceparent", "x")}, nil)); got != `traceparent="x"` {
		t.Errorf("nil value changed headers: %s", got)
	}
}

func storedAsKafka(hs []avro.Header) []kafka.Header {
	out := make([]kafka.Header, len(hs))
	for i, h := range hs {
		out[i] = kafka.Header{Key: h.Name, Value: h.Value}
	}
	return out
}
