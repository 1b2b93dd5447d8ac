package franz

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

	stopWarm context.CancelFunc // ends the first read, started by the constructor

	mu   sync.Mutex        // serializes Loads
	cons *kgo.Client       // reads the topic, from the first Load on
	pos  int64             // the offset after the last record read
	view map[string][]byte // record key -> last value read
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
	o := &OrderingStore{s: s, topic: topic, prod: cl, view: map[string][]byte{}}
	o.warm()
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
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.catchUp(ctx); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for k, v := range o.view {
		if key, ok := orderingkey.Decode([]byte(k), topic, partition); ok {
			out[key] = v
		}
	}
	return out, nil
}

// catchUp reads the topic up to its end into the view. The caller holds mu.
func (o *OrderingStore) catchUp(ctx context.Context) error {
	end, err := o.endOffset(ctx)
	if err != nil {
		return err
	}
	if o.cons == nil && end > 0 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(o.s.DeadLetterBrokers...), kgo.ClientID("redrive-errorhandler-ordering"),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			return fmt.Errorf("ordering store: load: new client: %w", err)
		}
		o.cons = cl
	}
	for o.pos < end {
		fs := o.cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("ordering store: load: %w", err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("ordering store: load: %w", ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Value == nil {
				delete(o.view, string(r.Key))
			} else {
				o.view[string(r.Key)] = r.Value
			}
			o.pos = r.Offset + 1
		})
	}
	return nil
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

// Close closes the store's clients.
func (o *OrderingStore) Close() {
	o.stopWarm()
	o.prod.Close()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cons != nil {
		o.cons.Close()
	}
}

// ClearOrdering drops the ordering guard's state of topic/partition, in the store too: its
// parked keys and an overflow (errorhandler.OrderingParkAll). The partition's later records are
// handed over again; resend what was parked, in offset order. It takes effect before the
// partition's next record; errorhandler.ErrNotAssigned when the partition is not assigned here
// or its topic is not guarded.
func (r *Runner[K, V]) ClearOrdering(ctx context.Context, topic string, partition int32) error {
	return r.e.ClearOrdering(ctx, topic, partition)
}

// warm reads the topic in the background, so that the first partition assignment finds the
// store caught up (a Load waits for it).
func (o *OrderingStore) warm() {
	ctx, cancel := context.WithCancel(context.Background())
	o.stopWarm = cancel
	o.mu.Lock() // taken before the constructor returns: the first Load waits for the read
	go func() {
		defer o.mu.Unlock()
		_ = o.catchUp(ctx)
	}()
}

// ResolveOrdering resolves the head failure of key on topic/partition as if its resend had been
// handled, for an operator who gives up on it (closes it at the service): the records parked
// behind it are handed over, in their original order, when they are resent. It takes effect
// before the partition's next record; errorhandler.ErrNotAssigned when the partition is not
// assigned here or its topic is not guarded.
func (r *Runner[K, V]) ResolveOrdering(ctx context.Context, topic string, partition int32, key []byte) error {
	return r.e.ResolveOrdering(ctx, topic, partition, key)
}
