package errorhandler

import (
	"context"
	"time"
)

// Header is one record header. It has the layout of confluent-kafka-go's kafka.Header and of
// franz-go's kgo.RecordHeader, so the adapters hand a record's headers over without copying.
type Header struct {
	Key   string
	Value []byte
}

// Message is a consumed record as the middleware sees it, whatever the Kafka client.
type Message struct {
	// Topic, Partition and Offset locate the record.
	Topic     string
	Partition int32
	Offset    int64
	// Key and Value are the record's bytes; a nil Value is a tombstone. Do not modify them.
	Key   []byte
	Value []byte
	// Headers are the record's headers, in order, duplicates and null values kept.
	Headers []Header
	// Timestamp is the record's timestamp (millisecond precision).
	Timestamp time.Time
	// Raw is the client's own record: a *kafka.Message (confluent adapter) or a *kgo.Record
	// (franz adapter). Do not modify it.
	Raw any
}

// HeaderValue returns the value of the last header named key, and whether there is one.
func (m *Message) HeaderValue(key string) ([]byte, bool) {
	for i := len(m.Headers) - 1; i >= 0; i-- {
		if m.Headers[i].Key == key {
			return m.Headers[i].Value, true
		}
	}
	return nil, false
}

// Record is one decoded record handed to a Handler.
type Record[K, V any] struct {
	// Key is the decoded key; the zero K when the key is nil or no KeyDecoder is configured.
	Key K
	// Value is the decoded value; the zero V for a tombstone.
	Value V
	// Tombstone is true when the record's value is nil. A tombstone is not a decode failure.
	Tombstone bool
	// Substituted is true when the decode hook substituted Value.
	Substituted bool
	// Attempt is 1 on the first call of the handler for this record, 2 on the first in-place
	// retry, and so on (see InPlaceRetry).
	Attempt int
	// Message is the raw record: topic, partition, offset, headers and bytes.
	Message Message
}

// Handler processes records. Returning an error or panicking is a failure of the process
// phase. A handler that returns because its context ended is not failing the record: the record
// stays uncommitted and is handled again by the partition's next owner.
type Handler[K, V any] interface {
	Handle(ctx context.Context, rec Record[K, V]) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc[K, V any] func(ctx context.Context, rec Record[K, V]) error

// Handle calls f.
func (f HandlerFunc[K, V]) Handle(ctx context.Context, rec Record[K, V]) error { return f(ctx, rec) }

// Middleware wraps a Handler.
type Middleware[K, V any] func(Handler[K, V]) Handler[K, V]

// Chain wraps h with mw; the first listed is outermost.
func Chain[K, V any](h Handler[K, V], mw ...Middleware[K, V]) Handler[K, V] {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}
