// Package franz is the errorhandler middleware's adapter for franz-go (kgo), the pure-Go Kafka
// client: a consumer built with it needs no cgo (CGO_ENABLED=0), and nothing it imports links
// librdkafka. Its [Runner] owns the whole consumer with the guarantees of package
// errorhandler: a halted partition is paused (PauseFetchPartitions) while the others run; only
// final offsets are committed (autocommit off, CommitOffsetsSync); rebalances are blocked while
// a poll's records are dispatched (BlockRebalanceOnPoll) and a revoke or loss lets go of the
// partitions cleanly (OnPartitionsRevoked, OnPartitionsLost); MPFEs go through a producer with
// acks=all and idempotence, and a record's offset is committed only after its event's
// acknowledgement. Its [DeadLetterer] serves consumers that keep their own poll loop.
//
// A minimal consumer:
//
//	r, err := franz.New(errorhandler.Config[[]byte, Order]{
//		GroupID:       "orders",
//		Topics:        []string{"orders"},
//		System:        "shop",
//		Service:       "order-service",
//		ValueDecoder:  errorhandler.JSON[Order](),
//		Handler:       errorhandler.HandlerFunc[[]byte, Order](book),
//		ProcessPolicy: errorhandler.DeadLetter,
//		DeadLetter:    errorhandler.DeadLetterConfig{ErrorTopic: "errors"},
//	}, franz.Settings{
//		Brokers:         []string{"localhost:9092"},
//		GroupInstanceID: "orders-1", // static membership
//	})
//	if err != nil { ... }
//	err = r.Run(ctx)
package franz
