package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	eh "github.com/redrive/redrive/errorhandler"
)

// fakeConsumer records the engine's pause and resume requests.
type fakeConsumer struct {
	mu      sync.Mutex
	paused  map[TP]int
	resumed map[TP]int
}

func newFakeConsumer() *fakeConsumer {
	return &fakeConsumer{paused: map[TP]int{}, resumed: map[TP]int{}}
}

func (c *fakeConsumer) Pause(tp TP) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused[tp]++
	return nil
}

func (c *fakeConsumer) Resume(tp TP, _ int64, _ bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resumed[tp]++
	return nil
}

func (c *fakeConsumer) Commit([]CommitOffset) error { return nil }

func (c *fakeConsumer) counts(tp TP) (paused, resumed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused[tp], c.resumed[tp]
}

// flowEngine returns a running engine with MaxBuffered 20 on partitions 0 and 1 of "t", whose
// handler waits for gate on the record at offset 0 of partition 0 (when gate is not nil).
func flowEngine(t *testing.T, gate chan struct{}) (*Engine[[]byte, []byte], *fakeConsumer) {
	t.Helper()
	e, err := New(eh.Config[[]byte, []byte]{
		GroupID: "g", Topics: []string{"t"}, System: "s", Service: "s",
		ValueDecoder: eh.Bytes(), MaxBuffered: 20, ProcessPolicy: eh.Skip,
		Handler: eh.HandlerFunc[[]byte, []byte](func(_ context.Context, rec eh.Record[[]byte, []byte]) error {
			if gate != nil && rec.Message.Partition == 0 && rec.Message.Offset == 0 {
				<-gate
			}
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Open(nil); err != nil {
		t.Fatal(err)
	}
	e.Start()
	e.Assign([]TP{{"t", 0}, {"t", 1}})
	c := newFakeConsumer()
	t.Cleanup(func() {
		if err := e.Shutdown(c); err != nil {
			t.Error(err)
		}
		e.Stopped()
	})
	return e, c
}

func dispatch(e *Engine[[]byte, []byte], partition int32, from, to int64) {
	for off := from; off < to; off++ {
		m := eh.Message{Topic: "t", Partition: partition, Offset: off, Value: []byte("v")}
		e.Dispatch(&m)
	}
}

// A worker that is only briefly behind drains its queue within the grace: the partition is
// not paused (a pause makes the client drop and fetch again what it buffered).
func TestFlowControlGraceAvoidsPauseForAWorkerBrieflyBehind(t *testing.T) {
	e, c := flowEngine(t, nil)
	for round := range 20 {
		dispatch(e, 0, int64(round*50), int64(round*50+50))
		e.Flush()
		e.Reconcile(c)
	}
	if p, _ := c.counts(TP{"t", 0}); p != 0 {
		t.Errorf("partition paused %d times, want 0: its worker keeps up", p)
	}
}

// A worker that is stuck (a slow handler) gets its partition paused after the grace, the
// other partition goes on, and the partition is resumed once its worker drained to half.
func TestFlowControlPausesAStuckPartitionAfterTheGrace(t *testing.T) {
	gate := make(chan struct{})
	e, c := flowEngine(t, gate)
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open) // before the engine's shutdown
	// The worker takes the first records and waits at offset 0; the next ones queue up.
	dispatch(e, 0, 0, 5)
	e.Flush()
	dispatch(e, 0, 5, 55)
	dispatch(e, 1, 0, 50)
	start := time.Now()
	e.Flush()
	if waited := time.Since(start); waited < flowGrace {
		t.Errorf("Flush returned after %v, want at least the grace %v", waited, flowGrace)
	}
	e.Reconcile(c)
	if p, _ := c.counts(TP{"t", 0}); p != 1 {
		t.Fatalf("stuck partition paused %d times, want 1", p)
	}
	if p, _ := c.counts(TP{"t", 1}); p != 0 {
		t.Errorf("the other partition paused %d times, want 0", p)
	}
	open()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.Reconcile(c)
		if _, r := c.counts(TP{"t", 0}); r == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the drained partition was not resumed")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
