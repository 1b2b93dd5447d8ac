package confluent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/internal/orderingkey"
)

// OrderingStore is an errorhandler.OrderingStore on a compacted Kafka topic (see
// docs/errorhandler.md): one record per guarded key, written with acks=all to the topic's
// partition 0, read back from its start on every partition assignment. Use one topic per
// consumer group, created with cleanup.policy=compact. It is safe for concurrent use.
type OrderingStore struct {
	brokers string
	topic   string
	prod    *kafka.Producer
	done    chan struct{}
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
	o := &OrderingStore{brokers: s.DeadLetterBrokers, topic: topic, prod: kp, done: make(chan struct{})}
	go func() { // events other than delivery reports (those go to each Save's channel)
		defer close(o.done)
		for range kp.Events() {
		}
	}()
	return o, nil
}

// Save writes key's state (nil: a tombstone) and waits for the acknowledgement.
func (o *OrderingStore) Save(ctx context.Context, topic string, partition int32, key, state []byte) error {
	ch := make(chan kafka.Event, 1)
	msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &o.topic, Partition: 0},
		Key: orderingkey.Encode(topic, partition, key), Value: state}
	if err := o.prod.Produce(msg, ch); err != nil {
		return fmt.Errorf("ordering store: save: %w", err)
	}
	select {
	case ev := <-ch:
		if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
			return fmt.Errorf("ordering store: save: %w", m.TopicPartition.Error)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ordering store: save: %w", ctx.Err())
	}
}

// Load reads the topic from its start to its end and returns the last state of every key of
// topic's partition.
func (o *OrderingStore) Load(ctx context.Context, topic string, partition int32) (map[string][]byte, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":  o.brokers,
		"group.id":           "redrive-errorhandler-ordering",
		"client.id":          "redrive-errorhandler-ordering",
		"enable.auto.commit": false,
		"fetch.wait.max.ms":  100,
	})
	if err != nil {
		return nil, fmt.Errorf("ordering store: load: new consumer: %w", err)
	}
	defer c.Close()
	_, high, err := c.QueryWatermarkOffsets(o.topic, 0, 10000)
	if err != nil {
		return nil, fmt.Errorf("ordering store: load: end offset of %s: %w", o.topic, err)
	}
	out := map[string][]byte{}
	if high <= 0 {
		return out, nil
	}
	if err := c.Assign([]kafka.TopicPartition{{Topic: &o.topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		return nil, fmt.Errorf("ordering store: load: assign: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("ordering store: load: %w", err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("ordering store: load: %s not read to its end within 30s", o.topic)
		}
		switch ev := c.Poll(100).(type) {
		case *kafka.Message:
			if k, ok := orderingkey.Decode(ev.Key, topic, partition); ok {
				if ev.Value == nil {
					delete(out, k)
				} else {
					out[k] = ev.Value
				}
			}
			if int64(ev.TopicPartition.Offset) >= high-1 {
				return out, nil
			}
		case kafka.Error:
			if ev.IsFatal() {
				return nil, fmt.Errorf("ordering store: load: %w", ev)
			}
		}
	}
}

// Close flushes and closes the store's producer.
func (o *OrderingStore) Close() {
	o.prod.Flush(5000)
	o.prod.Close()
	<-o.done
}

// ClearOrdering drops the ordering guard's state of topic/partition, in the store too: its
// parked keys and an overflow (errorhandler.OrderingParkAll). The partition's later records are
// handed over again; resend what was parked, in offset order. It takes effect before the
// partition's next record; errorhandler.ErrNotAssigned when the partition is not assigned here
// or its topic is not guarded.
func (r *Runner[K, V]) ClearOrdering(ctx context.Context, topic string, partition int32) error {
	return r.e.ClearOrdering(ctx, topic, partition)
}
