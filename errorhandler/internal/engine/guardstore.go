package engine

import (
	"context"
	"sync"

	"github.com/redrive/redrive/errorhandler/internal/orderingkey"
)

// StoreReader is what a StoreView asks of the adapter's Kafka client: reading partition 0 of
// the ordering store's compacted topic. Its methods are called by one catch-up at a time.
type StoreReader interface {
	// EndOffset returns the offset after the last record of the topic's partition 0. It starts
	// each catch-up.
	EndOffset(ctx context.Context) (int64, error)
	// Poll reads the next records after those already read, in offset order, and calls apply
	// with each (value nil: a tombstone). It is called again until the end offset is reached;
	// it may return having read nothing.
	Poll(ctx context.Context, apply func(key, value []byte, offset int64)) error
	// Close releases the reading client.
	Close()
}

// StoreView is the read side of the adapters' OrderingStore on a compacted Kafka topic: the
// last value of every record key, read through a StoreReader from the topic's start and kept,
// so that each Load reads only what came since the last one. It reads the topic in the
// background from its creation on, so that the first partition assignment finds the store
// caught up (a Load waits for that read). It is safe for concurrent use.
type StoreView struct {
	r        StoreReader
	stopWarm context.CancelFunc // ends the first read, started by NewStoreView

	mu   sync.Mutex        // serializes catch-ups
	pos  int64             // the offset after the last record read
	view map[string][]byte // record key -> last value read
}

// NewStoreView returns a StoreView reading through r and starts its first read.
func NewStoreView(r StoreReader) *StoreView {
	v := &StoreView{r: r, view: map[string][]byte{}}
	ctx, cancel := context.WithCancel(context.Background())
	v.stopWarm = cancel
	v.mu.Lock() // taken before NewStoreView returns: the first Load waits for the read
	go func() {
		defer v.mu.Unlock()
		_ = v.catchUp(ctx)
	}()
	return v
}

// Load reads the topic up to its end (from where the last Load stopped) and returns the last
// state of every key of topic's partition, as an OrderingStore's Load.
func (v *StoreView) Load(ctx context.Context, topic string, partition int32) (map[string][]byte, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.catchUp(ctx); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for k, val := range v.view {
		if key, ok := orderingkey.Decode([]byte(k), topic, partition); ok {
			out[key] = val
		}
	}
	return out, nil
}

// catchUp reads the topic up to its end into the view. The caller holds mu.
func (v *StoreView) catchUp(ctx context.Context) error {
	end, err := v.r.EndOffset(ctx)
	if err != nil {
		return err
	}
	for v.pos < end {
		if err := v.r.Poll(ctx, v.apply); err != nil {
			return err
		}
	}
	return nil
}

// apply records one record read from the topic. The caller holds mu.
func (v *StoreView) apply(key, value []byte, offset int64) {
	if value == nil {
		delete(v.view, string(key))
	} else {
		v.view[string(key)] = value
	}
	v.pos = offset + 1
}

// Close ends the first read, calls closeWriter (the store's producer, whose connections that
// read may be waiting on), waits for the reads in progress and closes the reader.
func (v *StoreView) Close(closeWriter func()) {
	v.stopWarm()
	closeWriter()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.r.Close()
}
