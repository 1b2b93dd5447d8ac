// Command orders-consumer is a runnable consumer that links the errorhandler middleware: it
// reads JSON orders, books them, and dead-letters the ones it cannot decode or process as
// MessageProcessingFailedEvents to an error topic, while serving its health on HTTP.
//
// -client picks the Kafka client: franz (franz-go, pure Go, the default) or confluent
// (confluent-kafka-go, needs cgo). Built with CGO_ENABLED=0 it offers franz only:
//
//	CGO_ENABLED=0 go run ./examples/orders-consumer -duration 10s
//	go run ./examples/orders-consumer -client confluent -duration 10s
//
// Without -brokers it starts an in-process Kafka and a generator of good and bad orders, so
// both run with no setup; that demo is a static member of its group as orders-consumer-0.
// -group-instance-id (GROUP_INSTANCE_ID) turns on static membership (KIP-345:
// group.instance.id, kgo.InstanceID): a consumer killed and restarted with the same id gets
// its partitions back at once instead of after the session timeout. Give every running
// consumer its own id, stable across its restarts, e.g. the pod name of a StatefulSet:
//
//	go run ./examples/orders-consumer -brokers kafka:9092 -group-instance-id "$POD_NAME"
//
// -consumer-config passes librdkafka properties (confluent only), -retries retries a
// TEMPORARY failure in place before the policy applies. Try `curl localhost:8081/health`, and with -policy fail, release a
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

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
	client := fs.String("client", "franz", "Kafka client: franz or confluent")
	var cs clientSettings
	fs.StringVar(&cs.instanceID, "group-instance-id", os.Getenv("GROUP_INSTANCE_ID"), "static group membership id (GROUP_INSTANCE_ID), unique per consumer and stable across its restarts, e.g. the pod name; empty: dynamic membership (with the in-process Kafka: orders-consumer-0)")
	fs.DurationVar(&cs.sessionTimeout, "session-timeout", 0, "group session timeout (0: the client's default)")
	fs.StringVar(&cs.consumerConfig, "consumer-config", "", "extra librdkafka consumer properties, key=value,key=value (confluent only)")
	retries := fs.Int("retries", 3, "handler calls per record for TEMPORARY failures, in place, before the policy applies (1: none)")
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
		if cs.instanceID == "" {
			cs.instanceID = "orders-consumer-0" // the demo is a static member
		}
		logger.Info("in-process kafka started", "brokers", *brokers)
		go generate(ctx, logger, *brokers, *topic)
	}

	reg := prometheus.NewRegistry()
	newRunner, ok := clients[*client]
	if !ok {
		return fmt.Errorf("invalid -client %q: this build offers %v", *client, clientNames())
	}
	r, err := newRunner(errorhandler.Config[[]byte, Order]{
		GroupID:       *group,
		Topics:        []string{*topic},
		System:        "shop",
		Service:       "orders-consumer",
		ValueDecoder:  errorhandler.JSON[Order](),
		Handler:       errorhandler.HandlerFunc[[]byte, Order](book),
		DecodePolicy:  pol,
		ProcessPolicy: pol,
		Retry:         errorhandler.InPlaceRetry{Attempts: *retries, Backoff: 50 * time.Millisecond},
		DeadLetter: errorhandler.DeadLetterConfig{
			ErrorTopic: *errorTopic,
			Extractor:  errorhandler.HeaderExtractor(errorhandler.HeaderNames{ID: "order-id", Type: "type"}),
		},
		Logger:  logger,
		Metrics: reg,
	}, *brokers, cs)
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
	logger.Info("consuming", "client", *client, "topic", *topic, "error_topic", *errorTopic, "policy", pol.String(), "http", *addr, "group_instance_id", cs.instanceID)
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		logger.Error("generator", "error", err)
		return
	}
	defer cl.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = cl.Flush(fctx)
			cancel()
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
		cl.Produce(ctx, &kgo.Record{
			Topic:   topic,
			Key:     []byte(id),
			Value:   []byte(value),
			Headers: []kgo.RecordHeader{{Key: "order-id", Value: []byte(id)}, {Key: "type", Value: []byte("OrderPlaced")}},
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
