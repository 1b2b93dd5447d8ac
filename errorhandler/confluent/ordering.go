package confluent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/internal/engine"
	"github.com/redrive/redrive/errorhandler/internal/orderingkey"
)

// OrderingStore is an errorhandler.OrderingStore on a compacted Kafka topic (see
// docs/errorhandler.md): one record per guarded key, written with acks=all to the topic's
// partition 0, read back from its start on every partition assignment. Use one topic per
// consumer group, created with cleanup.policy=compact. It is safe for concurrent use.
type OrderingStore struct {
	topic string
	prod  *kafka.Producer
	done  chan struct{}
	view  *engine.StoreView
}

var _ errorhandler.OrderingStore = (*OrderingStore)(nil)

// NewOrderingStore returns an OrderingStore on topic with the brokers and producer
// configuration of s (DeadLetterBrokers, ProducerConfig; acks=all and idempotence are kept).
// Close it after the Runner's Run returned.
func NewOrderingStore(s Settings, topic string) (*OrderingStore, error) {
	if topic == "" {
		return nil, errors.New("invalid settings: the ordering store's topic is empty")
	}
	if err := s.validate(false); err != nil {
		return nil, err
	}
	cfg := s.producerConfig()
	delete(cfg, "go.logs.channel.enable")
	cfg["linger.ms"] = 0
	cfg["go.delivery.report.fields"] = "key"
	kp, err := kafka.NewProducer(&cfg)
	if err != nil {
		return nil, fmt.Errorf("new ordering store producer: %w", err)
	}
	o := &OrderingStore{topic: topic, prod: kp, done: make(chan struct{})}
	go func() { // events other than delivery reports (those go to each Save's channel)
		defer close(o.done)
		for range kp.Events() {
		}
	}()
	o.view = engine.NewStoreView(&storeReader{brokers: s.DeadLetterBrokers, topic: topic, prod: kp})
	return o, nil
}

// Save writes the records in order (a nil value: a tombstone) and waits for their
// acknowledgements (the idempotent producer keeps their order).
func (o *OrderingStore) Save(ctx context.Context, topic string, partition int32, records ...errorhandler.OrderingRecord) error {
	ch := make(chan kafka.Event, len(records))
	for _, r := range records {
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &o.topic, Partition: 0},
			Key: orderingkey.Encode(topic, partition, r.Key), Value: r.Value}
		if err := o.prod.Produce(msg, ch); err != nil {
			return fmt.Errorf("ordering store: save: %w", err)
		}
	}
	var errs []error
	for range records {
		select {
		case ev := <-ch:
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				errs = append(errs, m.TopicPartition.Error)
			}
		case <-ctx.Done():
			return fmt.Errorf("ordering store: save: %w", ctx.Err())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ordering store: save: %w", errors.Join(errs...))
	}
	return nil
}

// Load reads the topic up to its end (from where the last Load stopped: the store keeps what it
// read) and returns the last state of every key of topic's partition.
func (o *OrderingStore) Load(ctx context.Context, topic string, partition int32) (map[string][]byte, error) {
	return o.view.Load(ctx, topic, partition)
}

// storeReader reads the store's topic for its view.
type storeReader struct {
	brokers  string
	topic    string
	prod     *kafka.Producer // the store's producer, asked for the end offset
	cons     *kafka.Consumer // reads the topic, from the first catch-up on
	deadline time.Time       // when the catch-up in progress gives up
}

// EndOffset opens the consumer on the first call and returns the topic's end offset.
func (sr *storeReader) EndOffset(_ context.Context) (int64, error) {
	if sr.cons == nil {
		c, err := kafka.NewConsumer(&kafka.ConfigMap{
			"bootstrap.servers":      sr.brokers,
			"group.id":               "redrive-errorhandler-ordering",
			"client.id":              "redrive-errorhandler-ordering",
			"enable.auto.commit":     false,
			"fetch.wait.max.ms":      10,
			"fetch.error.backoff.ms": 10,
		})
		if err != nil {
			return 0, fmt.Errorf("ordering store: load: new consumer: %w", err)
		}
		if err := c.Assign([]kafka.TopicPartition{{Topic: &sr.topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
			_ = c.Close()
			return 0, fmt.Errorf("ordering store: load: assign: %w", err)
		}
		sr.cons = c
	}
	// Asked on the producer's connections: the consumer's may wait behind a fetch.
	_, high, err := sr.prod.QueryWatermarkOffsets(sr.topic, 0, 10000)
	if err != nil {
		return 0, fmt.Errorf("ordering store: load: end offset of %s: %w", sr.topic, err)
	}
	sr.deadline = time.Now().Add(30 * time.Second)
	return high, nil
}

// Poll polls the consumer once (100ms at the most); a catch-up gives up 30s after it started.
func (sr *storeReader) Poll(ctx context.Context, apply func(key, value []byte, offset int64)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ordering store: load: %w", err)
	}
	if time.Now().After(sr.deadline) {
		return fmt.Errorf("ordering store: load: %s not read to its end within 30s", sr.topic)
	}
	switch ev := sr.cons.Poll(100).(type) {
	case *kafka.Message:
		apply(ev.Key, ev.Value, int64(ev.TopicPartition.Offset))
	case kafka.Error:
		if ev.IsFatal() {
			return fmt.Errorf("ordering store: load: %w", ev)
		}
	}
	return nil
}

// Close closes the consumer.
func (sr *storeReader) Close() {
	if sr.cons != nil {
		_ = sr.cons.Close()
	}
}

// Close flushes and closes the store's producer.
func (o *OrderingStore) Close() {
	o.view.Close(func() {
		o.prod.Flush(5000)
		o.prod.Close()
		<-o.done
	})
}

// ClearOrdering drops the ordering guard's state of topic/partition, in the store too: its
// parked keys and an overflow (errorhandler.OrderingParkAll). The partition's later records are
// handed over again; resend what was parked, in offset order. It takes effect before the
// partition's next record; errorhandler.ErrNotAssigned when the partition is not assigned here
// or its topic is not guarded.
func (r *Runner[K, V]) ClearOrdering(ctx context.Context, topic string, partition int32) error {
	return r.e.ClearOrdering(ctx, topic, partition)
}

// ResolveOrdering resolves the head failure of key on topic/partition as if its resend had been
// handled, for an operator who gives up on it (closes it at the service): the records parked
// behind it are handed over, in their original order, when they are resent. It takes effect
// before the partition's next record; errorhandler.ErrNotAssigned when the partition is not
// assigned here or its topic is not guarded.
func (r *Runner[K, V]) ResolveOrdering(ctx context.Context, topic string, partition int32, key []byte) error {
	return r.e.ResolveOrdering(ctx, topic, partition, key)
}
