package api_test

import (
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// With a TracerProvider, every request is a server span named by its method and route
// pattern, continuing the caller's traceparent; no attribute holds the query string, the
// payload or the token.
func TestAPIRequestSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, func(s *setup) { s.API.TracerProvider = tp; s.NoResender = true })
	id := e.insert(row{Value: []byte(`{"card":"4111-secret-value"}`)})

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	withParent := func(r *http.Request) { r.Header.Set("traceparent", parent) }
	if r := doRequest(t, e.handler, "GET", "/api/v1/failures/"+id.String()+"/payload", viewerToken, nil, withParent); r.status != http.StatusOK {
		t.Fatalf("payload: %d %s", r.status, r.body)
	}
	if r := doRequest(t, e.handler, "GET", "/api/v1/failures?q=secret-query", viewerToken, nil, nil); r.status != http.StatusOK {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	if r := doRequest(t, e.handler, "GET", "/api/v1/no-such-route", viewerToken, nil, nil); r.status != http.StatusNotFound {
		t.Fatalf("unmatched: %d", r.status)
	}

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	wantNames := []string{"GET /api/v1/failures/{id}/payload", "GET /api/v1/failures", "GET unmatched"}
	for i, sp := range spans {
		if sp.Name() != wantNames[i] || sp.SpanKind() != trace.SpanKindServer {
			t.Errorf("span %d: %q kind %v, want %q", i, sp.Name(), sp.SpanKind(), wantNames[i])
		}
		for _, a := range sp.Attributes() {
			v := a.Value.Emit()
			for _, secret := range []string{"secret", viewerToken, "4111"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %q attribute %s = %q holds %q", sp.Name(), a.Key, v, secret)
				}
			}
			if a.Key == "http.route" && i < 2 && v != strings.TrimPrefix(wantNames[i], "GET ") {
				t.Errorf("span %q http.route %q", sp.Name(), v)
			}
		}
	}
	if p := spans[0].Parent(); p.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !p.IsRemote() {
		t.Errorf("payload span's parent %v, want the caller's traceparent", p)
	}
	if spans[1].Parent().IsValid() {
		t.Errorf("a request without traceparent has a parent")
	}
}

// A retry through the API resends under the request's span: the resend span is its child, in
// the caller's trace, and links to the trace of the original's stored traceparent.
func TestRetrySpanIsChildOfRequest(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, func(s *setup) { s.API.TracerProvider = tp; s.ResendTracer = tp })
	const original = "00-11111111111111111111111111111111-2222222222222222-01"
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	id := e.insert(row{Topic: "orders", HeaderNames: []string{"traceparent"}, HeaderValues: [][]byte{[]byte(original)}})
	r := doRequest(t, e.handler, "POST", "/api/v1/failures/"+id.String()+"/retry", operatorToken, map[string]any{"reason": "fixed"},
		func(r *http.Request) { r.Header.Set("traceparent", caller) })
	if r.status != http.StatusOK {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	var request, resend sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		switch sp.Name() {
		case "POST /api/v1/failures/{id}/retry":
			request = sp
		case "resend orders":
			resend = sp
		}
	}
	if request == nil || resend == nil {
		t.Fatalf("spans %v: want the request's and the resend's", rec.Ended())
	}
	if resend.Parent().SpanID() != request.SpanContext().SpanID() || resend.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("resend span: parent %s in trace %s, want the request's span %s in the caller's trace",
			resend.Parent().SpanID(), resend.SpanContext().TraceID(), request.SpanContext().SpanID())
	}
	if l := resend.Links(); len(l) != 1 || l[0].SpanContext.TraceID().String() != "11111111111111111111111111111111" ||
		l[0].SpanContext.SpanID().String() != "2222222222222222" {
		t.Errorf("resend span links %+v, want one to the original %s", l, original)
	}
}
