// Package errorhandler is redrive's consumer-side middleware: it makes sure no Kafka record is
// lost when a consumer cannot decode or process it, and that one bad record stops at most its
// own partition.
//
// This package is the client-agnostic core: the configuration, handlers, decoders, policies,
// classification and the event identity. Two adapters run it on a Kafka client, with the same
// guarantees, proven by one conformance suite:
//
//   - errorhandler/franz for franz-go (kgo), pure Go: a consumer builds with CGO_ENABLED=0.
//   - errorhandler/confluent for confluent-kafka-go (librdkafka, cgo).
//
// There are two ways in. An adapter's Runner owns the whole consumer: the poll loop,
// rebalances, pausing and commits; the user gives decoders and a [Handler]. An adapter's
// DeadLetterer serves consumers that keep their own poll loop: Publish turns one failed record
// and its error into a published MessageProcessingFailedEvent (MPFE) and reports, through a
// Delivery, when the record's offset may be committed. The Runner dead-letters the same way.
//
// Decoding and processing are separate phases, each with a [Policy]: [Fail] (the default)
// halts the partition at the record (paused, never committed past it, every other partition
// keeps running) until an operator releases it with the Runner's Release or the HTTP handler of
// its HealthHandler; [Skip] drops and counts the record; [DeadLetter] publishes an MPFE and
// commits the record only after the error topic acknowledged it. Before the process policy
// applies, an [InPlaceRetry] may retry the handler for the same record (by default for
// TEMPORARY failures), the partition waiting in order while the others continue.
// Dead-lettering is pipelined: records after a failed one are handled while its MPFE is in
// flight, and each partition's committed offset only moves past records whose outcome is
// final. When the error topic cannot be written, the MPFE is retried with capped backoff while
// its partition waits, paused and uncommitted; it is never skipped instead. A flood guard halts
// a partition that fails too often in a row.
//
// Every MPFE's idempotenceId is derived from the consumer group and the record (see
// [IdempotenceID]): a record dead-lettered again after a crash, before its offset was
// committed, is the same failure to the service.
//
// Errors are classified with [Temporary], [Permanent] or any error implementing [Classified],
// found through wrapping; a panicking handler becomes a [*PanicError] that keeps the stack.
//
// A minimal consumer on franz-go:
//
//	type Order struct{ ID string; Amount int }
//
//	r, err := franz.New(errorhandler.Config[[]byte, Order]{
//		GroupID:       "orders",
//		Topics:        []string{"orders"},
//		System:        "shop",
//		Service:       "order-service",
//		ValueDecoder:  errorhandler.JSON[Order](),
//		Handler: errorhandler.HandlerFunc[[]byte, Order](func(ctx context.Context, rec errorhandler.Record[[]byte, Order]) error {
//			return book(ctx, rec.Value)
//		}),
//		DecodePolicy:  errorhandler.DeadLetter,
//		ProcessPolicy: errorhandler.DeadLetter,
//		Retry:         errorhandler.InPlaceRetry{Attempts: 3},
//		DeadLetter:    errorhandler.DeadLetterConfig{ErrorTopic: "errors"},
//		Logger:        logger,
//	}, franz.Settings{Brokers: []string{"localhost:9092"}})
//	if err != nil { ... }
//	http.Handle("/consumer/health", r.HealthHandler())
//	err = r.Run(ctx) // returns after a clean shutdown when ctx ends
//
// On confluent-kafka-go the same Config goes to confluent.New with
// confluent.Settings{Brokers: "localhost:9092"}.
package errorhandler
