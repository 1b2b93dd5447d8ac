package errorhandler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/franz"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// A consumer of JSON orders on franz-go (no cgo) that dead-letters what it cannot decode or process, run against an
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
	r, err := franz.New(errorhandler.Config[[]byte, order]{
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
	}, franz.Settings{Brokers: []string{brokers}})
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	for _, v := range values {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "orders", Value: []byte(v)}).FirstErr(); err != nil {
			panic(err)
		}
	}
}

func consume(brokers, topic string, n int) []*kgo.Record {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		out = append(out, cl.PollFetches(ctx).Records()...)
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int { return int(a.Offset - b.Offset) })
	return out
}
