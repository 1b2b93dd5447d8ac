// Command orders-consumer is a runnable consumer that links the errorhandler middleware: it
// reads JSON orders, books them, and dead-letters the ones it cannot decode or process as
// MessageProcessingFailedEvents to an error topic, while serving its health on HTTP.
//
// Without -brokers it starts an in-process Kafka and a generator of good and bad orders, so
//
//	go run ./examples/orders-consumer -duration 10s
//
// runs with no setup. Try `curl localhost:8081/health`, and with -policy fail, release a
// halted partition:
//
//	curl -X POST localhost:8081/health -d '{"topic":"orders","partition":0,"action":"skip"}'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/redrive/redrive/errorhandler"
)

// Order is the value of a record on the orders topic.
type Order struct {
	ID       string `json:"id"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "orders-consumer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("orders-consumer", flag.ContinueOnError)
	brokers := fs.String("brokers", os.Getenv("KAFKA_BROKERS"), "Kafka bootstrap servers (KAFKA_BROKERS); empty starts an in-process Kafka with a generator")
	topic := fs.String("topic", "orders", "topic to consume")
	errorTopic := fs.String("error-topic", "errors", "topic for MessageProcessingFailedEvents")
	group := fs.String("group", "orders-consumer", "consumer group")
	addr := fs.String("http", ":8081", "address of the health and metrics endpoints")
	policy := fs.String("policy", "dead-letter", "policy for both phases: fail, skip or dead-letter")
	duration := fs.Duration("duration", 0, "stop after this long (0: until interrupted)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pol, err := parsePolicy(*policy)
	if err != nil {
		return err
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	if *brokers == "" {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, *topic, *errorTopic))
		if err != nil {
			return fmt.Errorf("start in-process kafka: %w", err)
		}
		defer cluster.Close()
		*brokers = cluster.ListenAddrs()[0]
		logger.Info("in-process kafka started", "brokers", *brokers)
		go generate(ctx, logger, *brokers, *topic)
	}

	reg := prometheus.NewRegistry()
	r, err := errorhandler.New(errorhandler.Config[[]byte, Order]{
		Brokers:        *brokers,
		GroupID:        *group,
		Topics:         []string{*topic},
		System:         "shop",
		Service:        "orders-consumer",
		ConsumerConfig: kafka.ConfigMap{"log_level": 3},
		ValueDecoder:   errorhandler.JSON[Order](),
		Handler:        errorhandler.HandlerFunc[[]byte, Order](book),
		DecodePolicy:   pol,
		ProcessPolicy:  pol,
		DeadLetter: errorhandler.DeadLetterConfig{
			ErrorTopic:     *errorTopic,
			ProducerConfig: kafka.ConfigMap{"log_level": 3},
			Extractor:      errorhandler.HeaderExtractor(errorhandler.HeaderNames{ID: "order-id", Type: "type"}),
		},
		Logger:  logger,
		Metrics: reg,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/health", r.HealthHandler())
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server", "error", err)
		}
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	logger.Info("consuming", "topic", *topic, "error_topic", *errorTopic, "policy", pol.String(), "http", *addr)
	return r.Run(ctx)
}

// book processes an order: a negative amount is a permanent failure, an unknown currency a
// temporary one (say, the rates service is down), and now and then the handler panics.
func book(_ context.Context, rec errorhandler.Record[[]byte, Order]) error {
	o := rec.Value
	switch {
	case o.Amount < 0:
		return errorhandler.Permanent(fmt.Errorf("order %s: negative amount %d", o.ID, o.Amount), "INVALID_ORDER")
	case o.Currency != "CHF" && o.Currency != "EUR":
		return errorhandler.Temporary(fmt.Errorf("order %s: no exchange rate for %q", o.ID, o.Currency), "RATE_UNAVAILABLE")
	case o.Amount == 13:
		panic("unlucky amount")
	}
	return nil
}

// generate produces orders, about one in ten bad, until ctx ends.
func generate(ctx context.Context, logger *slog.Logger, brokers, topic string) {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": brokers, "log_level": 3})
	if err != nil {
		logger.Error("generator", "error", err)
		return
	}
	defer p.Close()
	go func() {
		for range p.Events() { // delivery reports
		}
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			p.Flush(1000)
			return
		case <-tick.C:
		}
		id := fmt.Sprintf("o-%d", i)
		value := fmt.Sprintf(`{"id":%q,"amount":%d,"currency":"CHF"}`, id, 1+rand.IntN(100))
		switch rand.IntN(20) {
		case 0:
			value = `{"id":` + id // undecodable
		case 1:
			value = fmt.Sprintf(`{"id":%q,"amount":-1,"currency":"CHF"}`, id)
		case 2:
			value = fmt.Sprintf(`{"id":%q,"amount":5,"currency":"XYZ"}`, id)
		}
		_ = p.Produce(&kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key:            []byte(id),
			Value:          []byte(value),
			Headers:        []kafka.Header{{Key: "order-id", Value: []byte(id)}, {Key: "type", Value: []byte("OrderPlaced")}},
		}, nil)
	}
}

func parsePolicy(s string) (errorhandler.Policy, error) {
	switch s {
	case "fail":
		return errorhandler.Fail, nil
	case "skip":
		return errorhandler.Skip, nil
	case "dead-letter":
		return errorhandler.DeadLetter, nil
	}
	return 0, fmt.Errorf("invalid -policy %q: want fail, skip or dead-letter", s)
}
