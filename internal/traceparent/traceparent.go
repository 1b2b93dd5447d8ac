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

// flagsKept are the trace flags version 00 defines: sampled and random.
const flagsKept = trace.FlagsSampled | trace.FlagsRandom

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
// not a valid traceparent. It reads a version-00 value without allocating, and hands any
// other to OpenTelemetry's W3C propagator (a fuzz test holds both to the same results).
func Parse(value []byte) (trace.SpanContext, bool) {
	if len(value) == 0 {
		return trace.SpanContext{}, false
	}
	if len(value) == 55 && value[0] == '0' && value[1] == '0' {
		return parse00(value)
	}
	return extract(value)
}

// parse00 parses a version-00 traceparent of 55 bytes: 00-<32 hex>-<16 hex>-<2 hex>, lower case.
func parse00(v []byte) (trace.SpanContext, bool) {
	if v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if !unhex(tid[:], v[3:35]) || !unhex(sid[:], v[36:52]) || !unhex(flags[:], v[53:55]) || flags[0] > 3 {
		return trace.SpanContext{}, false // version 00 reserves every flag but sampled and random
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & flagsKept, Remote: true,
	})
	return sc, sc.IsValid()
}

// unhex decodes lower-case hex src into dst (len(src) == 2*len(dst)).
func unhex(dst, src []byte) bool {
	for i := range dst {
		hi, ok1 := nibble(src[2*i])
		lo, ok2 := nibble(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func nibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// extract parses value with OpenTelemetry's W3C propagator.
func extract(value []byte) (trace.SpanContext, bool) {
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
	flags := byte(sc.TraceFlags() & flagsKept)
	return append(b, '-', hexDigits[flags>>4], hexDigits[flags&0xf])
}
