// Package traceparent reads and writes the W3C Trace Context `traceparent` header of Kafka
// records, with the OpenTelemetry API only (no SDK): the middleware's pure-Go build imports it.
package traceparent

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header is the name of the W3C trace-context header.
const Header = "traceparent"

// MaxLinks bounds the links that one span carries to the traces of the records it handles
// (the SDK's default link limit).
const MaxLinks = 128

// carrier holds one traceparent value for propagation.TraceContext.
type carrier string

func (c carrier) Get(key string) string {
	if key == Header {
		return string(c)
	}
	return ""
}
func (carrier) Set(string, string) {}
func (carrier) Keys() []string     { return []string{Header} }

// Parse returns the remote span context of a traceparent value, and false when the value is
// not a valid traceparent.
func Parse(value []byte) (trace.SpanContext, bool) {
	if len(value) == 0 {
		return trace.SpanContext{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), carrier(value))
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// Link returns a link to the span of a traceparent value, and false when it is not valid.
func Link(value []byte) (trace.Link, bool) {
	sc, ok := Parse(value)
	if !ok {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

// Format returns the traceparent value of sc (version 00), or nil when sc is not valid.
func Format(sc trace.SpanContext) []byte {
	if !sc.IsValid() {
		return nil
	}
	const hexDigits = "0123456789abcdef"
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	tid, sid := sc.TraceID(), sc.SpanID()
	for _, c := range tid {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	b = append(b, '-')
	for _, c := range sid {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	flags := byte(sc.TraceFlags()) & byte(trace.FlagsSampled)
	return append(b, '-', hexDigits[flags>>4], hexDigits[flags&0xf])
}
