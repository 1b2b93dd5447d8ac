package franz

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/internal/orderingkey"
)

// OrderingStore is an errorhandler.OrderingStore on a compacted Kafka topic (see
// docs/errorhandler.md): one record per guarded key, written with acks=all to the topic's
// partition 0, read back from its start on every partition assignment. Use one topic per
// consumer group, created with cleanup.policy=compact. It is safe for concurrent use.
type OrderingStore struct {
	s     Settings
	topic string
	prod  *kgo.Client
}

var _ errorhandler.OrderingStore = (*OrderingStore)(nil)

// NewOrderingStore returns an OrderingStore on topic with the brokers and producer options of
// s (DeadLetterBrokers, ProducerOpts; acks=all and idempotence are kept). Close it after the
// Runner's Run returned.
func NewOrderingStore(s Settings, topic string) (*OrderingStore, error) {
	if topic == "" {
		return nil, errors.New("invalid settings: the ordering store's topic is empty")
	}
	if err := s.validate(false); err != nil {
		return nil, err
	}
	opts := append(s.producerOpts(errorhandler.DiscardLogger()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("new ordering store client: %w", err)
	}
	if err := checkProducer(cl); err != nil {
		cl.Close()
		return nil, err
	}
	return &OrderingStore{s: s, topic: topic, prod: cl}, nil
}

// Save writes key's state (nil: a tombstone) and waits for the acknowledgement.
func (o *OrderingStore) Save(ctx context.Context, topic string, partition int32, key, state []byte) error {
	rec := &kgo.Record{Topic: o.topic, Partition: 0, Key: orderingkey.Encode(topic, partition, key), Value: state}
	if err := o.prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("ordering store: save: %w", err)
	}
	return nil
}

// Load reads the topic from its start to its end and returns the last state of every key of
// topic's partition.
func (o *OrderingStore) Load(ctx context.Context, topic string, partition int32) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	end, err := o.endOffset(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	if end <= 0 {
		return out, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.s.DeadLetterBrokers...), kgo.ClientID("redrive-errorhandler-ordering"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("ordering store: load: new client: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("ordering store: load: %w", err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("ordering store: load: %w", ferr)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if k, ok := orderingkey.Decode(r.Key, topic, partition); ok {
				if r.Value == nil {
					delete(out, k)
				} else {
					out[k] = r.Value
				}
			}
			if r.Offset >= end-1 {
				done = true
			}
		})
		if done {
			return out, nil
		}
	}
}

// endOffset returns the end offset of the topic's partition 0.
func (o *OrderingStore) endOffset(ctx context.Context) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = o.topic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Partition, p.Timestamp = 0, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, o.prod)
	if err != nil {
		return 0, fmt.Errorf("ordering store: end offset: %w", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return 0, fmt.Errorf("ordering store: end offset of %s: %w", o.topic, err)
			}
			return rp.Offset, nil
		}
	}
	return 0, fmt.Errorf("ordering store: end offset of %s: no answer", o.topic)
}

// Close closes the store's client.
func (o *OrderingStore) Close() { o.prod.Close() }

// ClearOrdering drops the ordering guard's state of topic/partition, in the store too: its
// parked keys and an overflow (errorhandler.OrderingParkAll). The partition's later records are
// handed over again; resend what was parked, in offset order. It takes effect before the
// partition's next record; errorhandler.ErrNotAssigned when the partition is not assigned here
// or its topic is not guarded.
func (r *Runner[K, V]) ClearOrdering(ctx context.Context, topic string, partition int32) error {
	return r.e.ClearOrdering(ctx, topic, partition)
}
