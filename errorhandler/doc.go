// Package errorhandler is redrive's consumer-side middleware for confluent-kafka-go: it makes
// sure no Kafka record is lost when a consumer cannot decode or process it, and that one bad
// record stops at most its own partition.
//
// There are two ways in. A [Runner] owns the whole consumer: the poll loop, rebalances, pausing
// and commits; the user gives decoders and a [Handler]. A [DeadLetterer] serves consumers that
// keep their own poll loop: [DeadLetterer.Publish] turns one failed record and its error into a
// published MessageProcessingFailedEvent (MPFE) and reports, through a [Delivery], when the
// record's offset may be committed. The Runner dead-letters through a DeadLetterer too.
//
// Decoding and processing are separate phases, each with a [Policy]: [Fail] (the default)
// halts the partition at the record (paused, never committed past it, every other partition
// keeps running) until an operator releases it with [Runner.Release] or the HTTP handler of
// [Runner.HealthHandler]; [Skip] drops and counts the record; [DeadLetter] publishes an MPFE
// and commits the record only after the error topic acknowledged it. Dead-lettering is
// pipelined: records after a failed one are handled while its MPFE is in flight, and each
// partition's committed offset only moves past records whose outcome is final. When the error
// topic cannot be written, the MPFE is retried with capped backoff while its partition waits,
// paused and uncommitted; it is never skipped instead. A flood guard halts a partition that
// fails too often in a row.
//
// Errors are classified with [Temporary], [Permanent] or any error implementing [Classified],
// found through wrapping; a panicking handler becomes a [*PanicError] that keeps the stack.
//
// A minimal consumer:
//
//	type Order struct{ ID string; Amount int }
//
//	r, err := errorhandler.New(errorhandler.Config[[]byte, Order]{
//		Brokers:       "localhost:9092",
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
//		DeadLetter:    errorhandler.DeadLetterConfig{ErrorTopic: "errors"},
//		Logger:        logger,
//	})
//	if err != nil { ... }
//	http.Handle("/consumer/health", r.HealthHandler())
//	err = r.Run(ctx) // returns after a clean shutdown when ctx ends
package errorhandler
