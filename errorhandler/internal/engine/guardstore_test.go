package engine

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/errorhandler/internal/orderingkey"
)

// fakeTopic is a StoreReader over records in memory: a topic's partition 0 that a test appends
// to. Poll hands over at most two records a call.
type fakeTopic struct {
	mu      sync.Mutex
	recs    [][2][]byte // key, value
	next    int         // the offset of the next record Poll hands over
	polls   int
	failEnd error
	closed  bool
	drained chan struct{} // closed when Poll first reaches the end
}

func (f *fakeTopic) append(key []byte, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var v []byte
	if value != "" {
		v = []byte(value)
	}
	f.recs = append(f.recs, [2][]byte{key, v})
}

func (f *fakeTopic) EndOffset(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.recs)), f.failEnd
}

func (f *fakeTopic) Poll(_ context.Context, apply func(key, value []byte, offset int64)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	for i := 0; i < 2 && f.next < len(f.recs); i++ {
		apply(f.recs[f.next][0], f.recs[f.next][1], int64(f.next))
		f.next++
	}
	if f.next == len(f.recs) && f.drained != nil {
		close(f.drained)
		f.drained = nil
	}
	return nil
}

func (f *fakeTopic) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

// TestStoreView: the first read runs from the view's creation, without a Load; a Load
// returns the last value of each key of its partition only (a tombstone deletes the key),
// reads only what came since the last read, and fails with the reader's error; Close closes
// the reader.
func TestStoreView(t *testing.T) {
	drained := make(chan struct{})
	topic := &fakeTopic{drained: drained}
	k := func(partition int32, key string) []byte { return orderingkey.Encode("orders", partition, []byte(key)) }
	topic.append(k(0, "a"), "a1")
	topic.append(k(1, "a"), "other partition")
	topic.append(k(0, "b"), "b1")
	topic.append(k(0, "a"), "a2")
	topic.append(k(0, "c"), "c1")
	v := NewStoreView(topic)
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("the first read did not reach the end of the topic within 10s")
	}
	ctx := context.Background()
	got, err := v.Load(ctx, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string][]byte{"a": []byte("a2"), "b": []byte("b1"), "c": []byte("c1")}; !maps.EqualFunc(got, want, bytesEqual) {
		t.Errorf("first Load = %q, want %q", got, want)
	}
	topic.mu.Lock()
	polls := topic.polls
	topic.mu.Unlock()
	if polls != 3 {
		t.Errorf("the first read and Load polled %d times, want 3 (5 records, 2 a poll, none by the Load)", polls)
	}

	topic.append(k(0, "b"), "") // tombstone
	topic.append(k(0, "d"), "d1")
	got, err = v.Load(ctx, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string][]byte{"a": []byte("a2"), "c": []byte("c1"), "d": []byte("d1")}; !maps.EqualFunc(got, want, bytesEqual) {
		t.Errorf("second Load = %q, want %q", got, want)
	}
	if topic.polls != 4 {
		t.Errorf("polled %d times in all, want 4: a Load reads only the records since the last", topic.polls)
	}
	if got, err := v.Load(ctx, "orders", 1); err != nil || !maps.EqualFunc(got, map[string][]byte{"a": []byte("other partition")}, bytesEqual) {
		t.Errorf("Load of partition 1 = %q, %v", got, err)
	}

	errDown := errors.New("broker unavailable")
	topic.mu.Lock()
	topic.failEnd = errDown
	topic.mu.Unlock()
	if _, err := v.Load(ctx, "orders", 0); !errors.Is(err, errDown) {
		t.Errorf("Load with a failing end offset: %v, want %v", err, errDown)
	}

	var writerClosed bool
	v.Close(func() { writerClosed = true })
	if !writerClosed || !topic.closed {
		t.Errorf("Close: writer closed %v, reader closed %v; want both", writerClosed, topic.closed)
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }
