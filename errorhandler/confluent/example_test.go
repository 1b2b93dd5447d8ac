package confluent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/confluent"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// A consumer of JSON orders on confluent-kafka-go that dead-letters what it cannot decode or process, run against an
// in-process Kafka.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "errors"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()[0]
	produce(brokers, `{"id":"o-1","amount":10}`, `not json`, `{"id":"o-3","amount":-5}`, `{"id":"o-4","amount":7}`)

	var mu sync.Mutex
	var booked []string
	r, err := confluent.New(errorhandler.Config[[]byte, order]{
		GroupID:      "orders",
		Topics:       []string{"orders"},
		System:       "shop",
		Service:      "order-service",
		ValueDecoder: errorhandler.JSON[order](),
		Handler: errorhandler.HandlerFunc[[]byte, order](func(_ context.Context, rec errorhandler.Record[[]byte, order]) error {
			if rec.Value.Amount < 0 {
				return errorhandler.Permanent(errors.New("negative amount"), "INVALID_ORDER")
			}
			mu.Lock()
			booked = append(booked, rec.Value.ID)
			mu.Unlock()
			return nil
		}),
		DecodePolicy:  errorhandler.DeadLetter,
		ProcessPolicy: errorhandler.DeadLetter,
		DeadLetter:    errorhandler.DeadLetterConfig{ErrorTopic: "errors"},
		Metrics:       prometheus.NewRegistry(),
	}, confluent.Settings{
		Brokers:        brokers,
		ConsumerConfig: kafka.ConfigMap{"log_level": 0},
		ProducerConfig: kafka.ConfigMap{"linger.ms": 1, "log_level": 0},
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	// Wait until both failures are in the error topic, then shut down cleanly.
	events := consume(brokers, "errors", 2)
	cancel()
	if err := <-done; err != nil {
		panic(err)
	}

	codec, _ := avro.NewCodec(avro.Config{})
	for _, m := range events {
		ev, err := codec.DecodeEvent("errors", m.Value)
		if err != nil {
			panic(err)
		}
		fmt.Printf("dead-lettered offset %d: %s %s %q\n", ev.References.Message.Offset,
			ev.References.ErrorType.Code, ev.References.ErrorType.Temporality, ev.Payload.OriginalMessage)
	}
	mu.Lock()
	slices.Sort(booked)
	fmt.Println("booked:", booked)
	mu.Unlock()
	// Output:
	// dead-lettered offset 1: DESERIALIZATION_FAILED PERMANENT "not json"
	// dead-lettered offset 2: INVALID_ORDER PERMANENT "{\"id\":\"o-3\",\"amount\":-5}"
	// booked: [o-1 o-4]
}

func produce(brokers string, values ...string) {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": brokers, "log_level": 0})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	topic := "orders"
	reports := make(chan kafka.Event, len(values))
	for _, v := range values {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte(v)}, reports); err != nil {
			panic(err)
		}
	}
	for range values {
		if m := (<-reports).(*kafka.Message); m.TopicPartition.Error != nil {
			panic(m.TopicPartition.Error)
		}
	}
}

func consume(brokers, topic string, n int) []*kafka.Message {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": brokers, "group.id": "example-reader", "auto.offset.reset": "earliest", "log_level": 0})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if err := c.Subscribe(topic, nil); err != nil {
		panic(err)
	}
	var out []*kafka.Message
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		if m, ok := c.Poll(100).(*kafka.Message); ok {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *kafka.Message) int { return int(a.TopicPartition.Offset - b.TopicPartition.Offset) })
	return out
}
