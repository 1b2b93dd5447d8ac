package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
)

// memOrderingStore is an OrderingStore in memory, shared by the engines of a test as a Kafka
// topic would be by consumers.
type memOrderingStore struct {
	mu   sync.Mutex
	recs map[TP]map[string][]byte
}

func (s *memOrderingStore) Load(_ context.Context, topic string, partition int32) (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range s.recs[TP{topic, partition}] {
		out[k] = v
	}
	return out, nil
}

func (s *memOrderingStore) Save(_ context.Context, topic string, partition int32, recs ...eh.OrderingRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		s.recs = map[TP]map[string][]byte{}
	}
	m := s.recs[TP{topic, partition}]
	if m == nil {
		m = map[string][]byte{}
		s.recs[TP{topic, partition}] = m
	}
	for _, r := range recs {
		if r.Value == nil {
			delete(m, string(r.Key))
		} else {
			m[string(r.Key)] = r.Value
		}
	}
	return nil
}

// ackProducer acknowledges every MPFE at once and keeps them.
type ackProducer struct {
	mu     sync.Mutex
	report func(*Job, error)
	jobs   []*Job
}

func (a *ackProducer) Produce(j *Job, _, _ []byte) error {
	a.mu.Lock()
	a.jobs = append(a.jobs, j)
	a.mu.Unlock()
	go a.report(j, nil)
	return nil
}
func (a *ackProducer) Purge()              {}
func (a *ackProducer) Close(time.Duration) {}

// produced returns the offsets and codes of the MPFEs produced so far.
func (a *ackProducer) produced() (offs []int64, codes []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, j := range a.jobs {
		offs = append(offs, j.msg.Offset)
		codes = append(codes, j.ev.References.ErrorType.Code)
	}
	return offs, codes
}

// guardedEngine is an engine with the guard on for topic "t", a handler that fails the
// identities of fail once each and records the identities it handled without error, and the
// partition t/0, which the test drives as its worker would.
type guardedEngine struct {
	e    *Engine[[]byte, []byte]
	p    *partition
	prod *ackProducer
	mu   sync.Mutex
	ok   []string
}

func newGuardedEngine(t *testing.T, st eh.OrderingStore, fail ...string) *guardedEngine {
	t.Helper()
	g := &guardedEngine{prod: &ackProducer{}}
	failed := map[string]bool{}
	e, err := New(eh.Config[[]byte, []byte]{
		GroupID: "g", Topics: []string{"t"}, System: "s", Service: "s",
		ValueDecoder: eh.Bytes(), ProcessPolicy: eh.DeadLetter, FloodThreshold: -1,
		DeadLetter: eh.DeadLetterConfig{ErrorTopic: "e"},
		Ordering:   eh.Ordering{Topics: []string{"t"}, Store: st},
		Metrics:    prometheus.NewRegistry(),
		Handler: eh.HandlerFunc[[]byte, []byte](func(_ context.Context, rec eh.Record[[]byte, []byte]) error {
			id := string(rec.Value)
			g.mu.Lock()
			defer g.mu.Unlock()
			if slices.Contains(fail, id) && !failed[id] {
				failed[id] = true
				return errTest
			}
			g.ok = append(g.ok, id)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Open(func(report func(*Job, error)) (Producer, error) {
		g.prod.report = report
		return g.prod, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.Start()
	g.e = e
	g.p = newPartition(TP{Topic: "t"}, e.met, e.sig)
	e.attachGuard(g.p)
	if !e.loadGuard(g.p) {
		t.Fatal("load")
	}
	return g
}

// feed hands records to the partition: each is key:identity at the next offset from first; a
// resend is an identity of another offset (it carries redrive-origin).
func (g *guardedEngine) feed(first int64, recs ...[2]string) {
	for i, r := range recs {
		off := first + int64(i)
		msg := eh.Message{Topic: "t", Offset: off, Key: []byte(r[0]), Value: []byte(r[1])}
		if r[1] != "t/0/"+strconv.FormatInt(off, 10) {
			msg.Headers = []eh.Header{{Key: avro.HeaderOrigin, Value: []byte(r[1])}}
		}
		g.e.handle(g.p, &msg)
	}
}

func (g *guardedEngine) handled() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ok)
}

// settled waits until the partition has nothing pending (stored and acknowledged).
func (g *guardedEngine) settled(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.p.mu.Lock()
		n := g.p.track.pending()
		g.p.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records still pending", n)
		}
		time.Sleep(time.Millisecond)
	}
}

var errTest = errors.New("planned failure")

// TestGuardReplayAfterRestart: a consumer parks a1 behind a0, hands over a0's resend, and
// stops before a1's resend; its successor replays the partition from the start with the stored
// state. It hands over neither a0 nor a0's resend again, parks a1 again (the same failure, so
// the service stores it once), and hands over a1's resend.
func TestGuardReplayAfterRestart(t *testing.T) {
	st := &memOrderingStore{}
	first := newGuardedEngine(t, st, "t/0/0")
	log := [][2]string{{"a", "t/0/0"}, {"a", "t/0/1"}, {"b", "t/0/2"}, {"a", "t/0/0"}}
	first.feed(0, log...)
	first.settled(t)
	if got, want := first.handled(), []string{"t/0/2", "t/0/0"}; !slices.Equal(got, want) {
		t.Fatalf("first consumer handled %v, want %v", got, want)
	}
	offs, codes := first.prod.produced()
	if !slices.Equal(offs, []int64{0, 1}) || codes[1] != avro.CodeParkedBehind {
		t.Fatalf("first consumer dead-lettered %v %v, want the head at 0 and 1 parked", offs, codes)
	}

	second := newGuardedEngine(t, st)
	second.feed(0, append(log, [2]string{"a", "t/0/1"})...)
	second.settled(t)
	if got, want := second.handled(), []string{"t/0/2", "t/0/1"}; !slices.Equal(got, want) {
		t.Errorf("successor handled %v, want b again (at least once) and a1's resend only", got)
	}
	offs, codes = second.prod.produced()
	if !slices.Equal(offs, []int64{1}) || codes[0] != avro.CodeParkedBehind {
		t.Errorf("successor dead-lettered %v %v, want a1 parked again", offs, codes)
	}
	if n := len(second.p.guard.keys); n != 0 {
		t.Errorf("%d keys still guarded after the chain", n)
	}
	if left, _ := st.Load(context.Background(), "t", 0); len(left) != 0 {
		t.Errorf("stored after the chain: %v", left)
	}
}

// TestGuardReleaseHeader: a resend carrying redrive-release = the head resolves it; a resend
// arriving while the head waits is parked again as PERMANENT.
func TestGuardReleaseHeader(t *testing.T) {
	g := newGuardedEngine(t, &memOrderingStore{}, "t/0/0")
	g.feed(0, [2]string{"a", "t/0/0"}, [2]string{"a", "t/0/1"}, [2]string{"a", "t/0/2"})
	// a2's resend before a1's, while the head waits: parked again, PERMANENT.
	g.feed(3, [2]string{"a", "t/0/2"})
	// a1's resend releasing the head.
	msg := eh.Message{Topic: "t", Offset: 4, Key: []byte("a"), Value: []byte("t/0/1"),
		Headers: []eh.Header{{Key: avro.HeaderOrigin, Value: []byte("t/0/1")}, {Key: avro.HeaderRelease, Value: []byte("t/0/0")}}}
	g.e.handle(g.p, &msg)
	g.feed(5, [2]string{"a", "t/0/2"})
	g.settled(t)
	if got, want := g.handled(), []string{"t/0/1", "t/0/2"}; !slices.Equal(got, want) {
		t.Errorf("handled %v, want %v", got, want)
	}
	g.prod.mu.Lock()
	defer g.prod.mu.Unlock()
	if n := len(g.prod.jobs); n != 4 {
		t.Fatalf("%d MPFEs, want the head, 2 parked and the early resend parked again", n)
	}
	if tmp := g.prod.jobs[3].ev.References.ErrorType.Temporality; tmp != avro.Permanent {
		t.Errorf("the early resend parked as %s while the head waits, want PERMANENT", tmp)
	}
}

// TestGuardOutOfOrderWhileReleasing: once the head is resolved, a parked record's resend that
// arrives before the one ahead of it is parked again as TEMPORARY (the service resends it by
// itself), and the records are handed over in their original order.
func TestGuardOutOfOrderWhileReleasing(t *testing.T) {
	g := newGuardedEngine(t, &memOrderingStore{}, "t/0/0")
	g.feed(0, [2]string{"a", "t/0/0"}, [2]string{"a", "t/0/1"}, [2]string{"a", "t/0/2"})
	g.feed(3, [2]string{"a", "t/0/0"}, [2]string{"a", "t/0/2"}, [2]string{"a", "t/0/1"}, [2]string{"a", "t/0/2"})
	g.settled(t)
	if got, want := g.handled(), []string{"t/0/0", "t/0/1", "t/0/2"}; !slices.Equal(got, want) {
		t.Errorf("handled %v, want %v", got, want)
	}
	g.prod.mu.Lock()
	defer g.prod.mu.Unlock()
	if n := len(g.prod.jobs); n != 4 {
		t.Fatalf("%d MPFEs, want the head, 2 parked and the early resend parked again", n)
	}
	if j := g.prod.jobs[3]; j.msg.Offset != 4 || j.ev.References.ErrorType.Temporality != avro.Temporary {
		t.Errorf("MPFE of %d is %s, want the early resend at 4 parked as TEMPORARY", j.msg.Offset, j.ev.References.ErrorType.Temporality)
	}
	if n := len(g.p.guard.keys); n != 0 {
		t.Errorf("%d keys still guarded after the chain", n)
	}
}

// TestGuardDropsDuplicateResends: a second resend of a record already handed over during the
// release (the service resent it twice) is dropped, not parked and handed over again later.
func TestGuardDropsDuplicateResends(t *testing.T) {
	g := newGuardedEngine(t, &memOrderingStore{}, "t/0/0")
	g.feed(0, [2]string{"a", "t/0/0"}, [2]string{"a", "t/0/1"}, [2]string{"a", "t/0/2"})
	g.feed(3, [2]string{"a", "t/0/0"}, [2]string{"a", "t/0/1"}, [2]string{"a", "t/0/0"}, [2]string{"a", "t/0/1"}, [2]string{"a", "t/0/2"})
	g.settled(t)
	if got, want := g.handled(), []string{"t/0/0", "t/0/1", "t/0/2"}; !slices.Equal(got, want) {
		t.Errorf("handled %v, want %v", got, want)
	}
	if offs, _ := g.prod.produced(); !slices.Equal(offs, []int64{0, 1, 2}) {
		t.Errorf("dead-lettered %v, want the head and its 2 parked records only", offs)
	}
}

// TestGuardStoreWaits: after a failed store call the guard waits the dead-letter retry backoff.
// A failed load stops waiting when the worker is told to stop taking records or the partition
// is dropped; a failed write stops only when the partition is dropped (its records stay
// uncommitted until written), and otherwise tries again after the backoff.
func TestGuardStoreWaits(t *testing.T) {
	newEngine := func(backoff time.Duration) *Engine[[]byte, []byte] {
		t.Helper()
		e, err := New(eh.Config[[]byte, []byte]{
			GroupID: "g", Topics: []string{"t"}, System: "s", Service: "s",
			ValueDecoder: eh.Bytes(), ProcessPolicy: eh.DeadLetter,
			DeadLetter: eh.DeadLetterConfig{ErrorTopic: "e", RetryBackoff: backoff, MaxRetryBackoff: backoff},
			Ordering:   eh.Ordering{Topics: []string{"t"}, Store: &memOrderingStore{}},
			Metrics:    prometheus.NewRegistry(),
			Handler:    eh.HandlerFunc[[]byte, []byte](func(context.Context, eh.Record[[]byte, []byte]) error { return nil }),
		})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	errStore := errors.New("store unavailable")
	slow := newEngine(time.Hour) // a wait that returns ended early
	stopping := newPartition(TP{Topic: "t"}, slow.met, slow.sig)
	close(stopping.quit)
	if slow.guardWait(stopping, 1, "load", errStore) {
		t.Error("a failed load went on waiting after the worker was told to stop")
	}
	dropped := newPartition(TP{Topic: "t"}, slow.met, slow.sig)
	dropped.cancel()
	if slow.guardWait(dropped, 1, "load", errStore) {
		t.Error("a failed load went on waiting for a dropped partition")
	}
	if slow.guardRetryWait(dropped, 1, errStore) {
		t.Error("a failed write went on waiting for a dropped partition")
	}
	fast := newEngine(time.Millisecond)
	stopping = newPartition(TP{Topic: "t"}, fast.met, fast.sig)
	close(stopping.quit)
	if !fast.guardRetryWait(stopping, 3, errStore) {
		t.Error("a failed write gave up when the worker was told to stop taking records")
	}
	if !fast.guardWait(newPartition(TP{Topic: "t"}, fast.met, fast.sig), 3, "load", errStore) {
		t.Error("a failed load gave up on a partition still assigned")
	}
}
