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
	"github.com/redrive/redrive/errorhandler/internal/engine"
	"github.com/redrive/redrive/errorhandler/internal/orderingkey"
)

// OrderingStore is an errorhandler.OrderingStore on a compacted Kafka topic (see
// docs/errorhandler.md): one record per guarded key, written with acks=all to the topic's
// partition 0, read back from its start on every partition assignment. Use one topic per
// consumer group, created with cleanup.policy=compact. It is safe for concurrent use.
type OrderingStore struct {
	topic string
	prod  *kgo.Client
	view  *engine.StoreView
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
	o := &OrderingStore{topic: topic, prod: cl}
	o.view = engine.NewStoreView(&storeReader{brokers: s.DeadLetterBrokers, topic: topic, prod: cl})
	return o, nil
}

// Save writes the records in order (a nil value: a tombstone) and waits for their
// acknowledgements.
func (o *OrderingStore) Save(ctx context.Context, topic string, partition int32, records ...errorhandler.OrderingRecord) error {
	recs := make([]*kgo.Record, len(records))
	for i, r := range records {
		recs[i] = &kgo.Record{Topic: o.topic, Partition: 0, Key: orderingkey.Encode(topic, partition, r.Key), Value: r.Value}
	}
	if err := o.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("ordering store: save: %w", err)
	}
	return nil
}

// Load reads the topic up to its end (from where the last Load stopped: the store keeps what it
// read) and returns the last state of every key of topic's partition.
func (o *OrderingStore) Load(ctx context.Context, topic string, partition int32) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return o.view.Load(ctx, topic, partition)
}

// storeReader reads the store's topic for its view.
type storeReader struct {
	brokers []string
	topic   string
	prod    *kgo.Client // the store's producer, asked for the end offset
	cons    *kgo.Client // reads the topic, from the first record to read on
}

// EndOffset returns the end offset of the topic's partition 0.
func (sr *storeReader) EndOffset(ctx context.Context) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = sr.topic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Partition, p.Timestamp = 0, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, sr.prod)
	if err != nil {
		return 0, fmt.Errorf("ordering store: end offset: %w", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return 0, fmt.Errorf("ordering store: end offset of %s: %w", sr.topic, err)
			}
			return rp.Offset, nil
		}
	}
	return 0, fmt.Errorf("ordering store: end offset of %s: no answer", sr.topic)
}

// Poll opens the consumer on the first call and polls one fetch.
func (sr *storeReader) Poll(ctx context.Context, apply func(key, value []byte, offset int64)) error {
	if sr.cons == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sr.brokers...), kgo.ClientID("redrive-errorhandler-ordering"),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{sr.topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			return fmt.Errorf("ordering store: load: new client: %w", err)
		}
		sr.cons = cl
	}
	fs := sr.cons.PollFetches(ctx)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ordering store: load: %w", err)
	}
	var ferr error
	fs.EachError(func(_ string, _ int32, err error) { ferr = err })
	if ferr != nil {
		return fmt.Errorf("ordering store: load: %w", ferr)
	}
	fs.EachRecord(func(r *kgo.Record) { apply(r.Key, r.Value, r.Offset) })
	return nil
}

// Close closes the consumer.
func (sr *storeReader) Close() {
	if sr.cons != nil {
		sr.cons.Close()
	}
}

// Close closes the store's clients.
func (o *OrderingStore) Close() {
	o.view.Close(o.prod.Close)
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
