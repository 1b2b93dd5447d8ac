// Package confluent is the errorhandler middleware's adapter for confluent-kafka-go
// (librdkafka, cgo). Its [Runner] owns the whole consumer: the poll loop, rebalances (eager
// and cooperative), pausing and commits; its [DeadLetterer] serves consumers that keep their
// own poll loop. Policies, handlers, decoders and guarantees are those of package
// errorhandler, which describes them; this package adds the client's [Settings].
//
// A minimal consumer:
//
//	r, err := confluent.New(errorhandler.Config[[]byte, Order]{
//		GroupID:       "orders",
//		Topics:        []string{"orders"},
//		System:        "shop",
//		Service:       "order-service",
//		ValueDecoder:  errorhandler.JSON[Order](),
//		Handler:       errorhandler.HandlerFunc[[]byte, Order](book),
//		ProcessPolicy: errorhandler.DeadLetter,
//		DeadLetter:    errorhandler.DeadLetterConfig{ErrorTopic: "errors"},
//	}, confluent.Settings{Brokers: "localhost:9092"})
//	if err != nil { ... }
//	err = r.Run(ctx)
//
// Users of franz-go (pure Go, no cgo) use package errorhandler/franz instead, with the same
// errorhandler.Config.
package confluent
