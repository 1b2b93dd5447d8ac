package errorhandler

import (
	"context"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

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
	// Message is the raw record: topic, partition, offset, headers and bytes. Do not modify it.
	Message *kafka.Message
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

// chain wraps h with mw; the first listed is outermost.
func chain[K, V any](h Handler[K, V], mw []Middleware[K, V]) Handler[K, V] {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}
