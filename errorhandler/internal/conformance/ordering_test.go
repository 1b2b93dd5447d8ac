package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/confluent"
	"github.com/redrive/redrive/errorhandler/franz"
	"github.com/redrive/redrive/store"
)

// workload is a random sequence of keyed records; its ledger fails some of them.
type workload struct {
	keys    int
	l       *ledger
	failing int
	want    map[string][]string // key -> identities in offset order
	total   int
}

// produceWorkload writes n records over keys keys to the env's partitions (a key always to
// the same partition), with values v<i>; about one in failEvery fails once or twice.
func (e *env) produceWorkload(w *workload, rng *rand.Rand, n, partitions, failEvery int) {
	e.t.Helper()
	msgs := make([]*kafka.Message, n)
	for i := range msgs {
		k := rng.IntN(w.keys)
		topic := testTopic
		v := fmt.Sprintf("v%d", w.total+i)
		msgs[i] = &kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(k % partitions)},
			Key:            []byte(fmt.Sprintf("key%d", k)),
			Value:          []byte(v),
		}
		if rng.IntN(failEvery) == 0 {
			w.l.failValue(v, 1+rng.IntN(2))
			w.failing++
		}
	}
	for _, m := range e.k.Produce(e.t, msgs...) {
		id := store.TopicPartitionOffset(testTopic, m.TopicPartition.Partition, int64(m.TopicPartition.Offset))
		w.want[string(m.Key)] = append(w.want[string(m.Key)], id)
	}
	w.total += n
}

func newWorkload(keys int) *workload {
	return &workload{keys: keys, l: newLedger(nil), want: map[string][]string{}}
}

// TestOrderingGuardKeepsKeyOrder is the property: over random key sequences and random
// failing records (some failing again when resent), with more records of the failed keys
// arriving while their chains are released, the handler sees every record of every key
// without error exactly once, in offset order, and other keys keep flowing.
func TestOrderingGuardKeepsKeyOrder(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
				e := newEnv(t, a, 2)
				e.k.CreateTopic(t, testStateTopic, 1)
				rng := rand.New(rand.NewPCG(seed, 24))
				w := newWorkload(6)
				e.produceWorkload(w, rng, 120, 2, 8)
				ctx := context.Background()
				svc := e.startService(ctx)
				l := w.l
				s := e.start(e.orderedConfig("ordered-"+string(a), l, e.newOrderingStore()))
				waitFor(t, "some records parked", func() bool { _, p := svc.counts(); return p > 0 })
				e.produceWorkload(w, rng, 60, 2, 8) // more records of the parked keys, during the release
				waitFor(t, "every record handled", func() bool { return l.distinctOK() == w.total })
				if err := s.stop(); err != nil {
					t.Fatal(err)
				}
				checkOrder(t, l.succeeded(), w.want, false)
				events, parked := svc.counts()
				t.Logf("%d records, %d failing, %d MPFEs of which %d parked", w.total, w.failing, events, parked)
			})
		}
	})
}

// TestOrderingGuardParksBehindTheHead checks the wire: a parked record's MPFE has error code
// PARKED_BEHIND, is PERMANENT, and names the head's event id and identity; the other key is
// handed over at once.
func TestOrderingGuardParksBehindTheHead(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		e.k.CreateTopic(t, testStateTopic, 1)
		e.k.Produce(t, keyed("a:a0", "a:a1", "b:b2", "a:a3", "b:b4")...)
		l := newLedger(map[string]int{"orders/0/0": 1})
		s := e.start(e.orderedConfig("parks-"+string(a), l, e.newOrderingStore()))
		evs := e.mpfes(3)
		waitFor(t, "the other key handed over", func() bool { return len(l.succeeded()["b"]) == 2 })
		waitFor(t, "the guard's gauge at the head and its 2 parked records", func() bool {
			return metricValue(e.reg, "redrive_errorhandler_ordering_entries", map[string]string{"topic": testTopic, "partition": "0"}) == 3
		})
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		head := evs[0]
		if head.References.ErrorType.Code == avro.CodeParkedBehind || head.References.Message.Offset != 0 {
			t.Fatalf("first MPFE is %s at %d, want the head at 0", head.References.ErrorType.Code, head.References.Message.Offset)
		}
		for i, off := range []int64{1, 3} {
			ev := evs[i+1]
			md := ev.Payload.FailedMessageMetadata
			if ev.References.Message.Offset != off || ev.References.ErrorType.Code != avro.CodeParkedBehind ||
				ev.References.ErrorType.Temporality != avro.Permanent {
				t.Errorf("MPFE of %d: offset %d code %s temporality %s", off, ev.References.Message.Offset, ev.References.ErrorType.Code, ev.References.ErrorType.Temporality)
			}
			if got := string(md.Headers[avro.ParkedBehindEntry]); got != head.Identity.EventID {
				t.Errorf("MPFE of %d parked behind %q, want the head's event %q", off, got, head.Identity.EventID)
			}
			if got := string(md.Headers[avro.ParkedHeadEntry]); got != "orders/0/0" {
				t.Errorf("MPFE of %d parked behind head %q, want orders/0/0", off, got)
			}
			if hs, err := md.OriginalHeaders(); err != nil || len(hs) != 0 {
				t.Errorf("MPFE of %d: original headers %v, %v; want none", off, hs, err)
			}
		}
		if got := l.succeeded()["a"]; len(got) != 0 {
			t.Errorf("key a handed over %v while its head waits", got)
		}
	})
}

// TestOrderingGuardSurvivesRebalance parks keys on a consumer, then a second member joins the
// group (the partitions are split) while the chains are held back at the service; more records
// of the parked keys arrive; then the service resends. The parked keys are known to whichever
// member owns their partition, so the property holds.
func TestOrderingGuardSurvivesRebalance(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 4)
		e.k.CreateTopic(t, testStateTopic, 1)
		rng := rand.New(rand.NewPCG(7, 24))
		w := newWorkload(8)
		e.produceWorkload(w, rng, 120, 4, 6)
		svc := e.startService(context.Background())
		svc.setHold(true)
		l := w.l
		group := "rebalance-" + string(a)
		first := e.start(e.orderedConfig(group, l, e.newOrderingStore()))
		waitFor(t, "every head and its parked records dead-lettered", func() bool {
			n := 0
			for _, ids := range w.want {
				n += len(ids)
			}
			ev, _ := svc.counts()
			return l.distinctOK()+ev >= n && ev > 0
		})
		cfg := e.orderedConfig(group, l, e.newOrderingStore())
		reg := prometheus.NewRegistry()
		cfg.Metrics = reg
		second := e.start(cfg)
		waitFor(t, "the second member owning partitions", func() bool {
			mfs, _ := reg.Gather()
			for _, mf := range mfs {
				if mf.GetName() == "redrive_errorhandler_consecutive_failures" && len(mf.GetMetric()) > 0 {
					return true
				}
			}
			return false
		})
		e.produceWorkload(w, rng, 40, 4, 1000)
		waitFor(t, "the second member parking records of the keys parked by the first", func() bool {
			return metricValue(reg, "redrive_errorhandler_failures_total", map[string]string{"outcome": string(eh.OutcomeParked)}) > 0
		})
		svc.setHold(false)
		waitFor(t, "every record handled", func() bool { return l.distinctOK() == w.total })
		checkOrder(t, l.succeeded(), w.want, false)
		for _, s := range []*started{first, second} {
			if err := s.stop(); err != nil {
				t.Error(err)
			}
		}
	})
}

// keyed returns records of the test topic's partition 0 with the given key:value pairs.
func keyed(pairs ...string) []*kafka.Message {
	topic := testTopic
	out := make([]*kafka.Message, len(pairs))
	for i, kv := range pairs {
		k, v, _ := strings.Cut(kv, ":")
		out[i] = &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Key: []byte(k), Value: []byte(v)}
	}
	return out
}

// TestOrderingGuardHaltsAtTheLimit: with AtLimit OrderingHalt, the record that would exceed
// MaxParked halts its partition (reason ordering-limit); a release with dead-letter parks it
// and the partition goes on.
func TestOrderingGuardHaltsAtTheLimit(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		e.k.CreateTopic(t, testStateTopic, 1)
		e.k.Produce(t, keyed("a:a0", "a:a1", "a:a2", "a:a3", "b:b4")...)
		l := newLedger(map[string]int{"orders/0/0": 1})
		cfg := e.orderedConfig("limit-halt-"+string(a), l, e.newOrderingStore())
		cfg.Ordering.MaxParked = 3
		s := e.start(cfg)
		waitFor(t, "the partition halted at the limit", func() bool { return len(s.r.Health().Halted) == 1 })
		h := s.r.Health().Halted[0]
		if h.Reason != eh.ReasonOrderingLimit || h.Offset != 3 || h.Code != avro.CodeParkedBehind {
			t.Fatalf("halted %+v, want reason %s at offset 3 with code %s", h, eh.ReasonOrderingLimit, avro.CodeParkedBehind)
		}
		if got := l.succeeded()["b"]; len(got) != 0 {
			t.Fatalf("b handed over %v past the halt", got)
		}
		if err := s.r.Release(context.Background(), testTopic, 0, 3, eh.ActionDeadLetter); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "b handed over after the release", func() bool { return len(l.succeeded()["b"]) == 1 })
		evs := e.mpfes(4)
		for _, ev := range evs[1:] {
			if ev.References.ErrorType.Code != avro.CodeParkedBehind {
				t.Errorf("MPFE of %d has code %s, want %s", ev.References.Message.Offset, ev.References.ErrorType.Code, avro.CodeParkedBehind)
			}
		}
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestOrderingGuardParksAllAtTheLimit: with AtLimit OrderingParkAll, once the guard is full
// every later record of the partition is parked, whatever its key, until ClearOrdering; then
// records are handed over again.
func TestOrderingGuardParksAllAtTheLimit(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		e.k.CreateTopic(t, testStateTopic, 1)
		e.k.Produce(t, keyed("a:a0", "a:a1", "a:a2", "b:b3")...)
		l := newLedger(map[string]int{"orders/0/0": 1})
		cfg := e.orderedConfig("limit-park-"+string(a), l, e.newOrderingStore())
		cfg.Ordering.MaxParked = 2
		cfg.Ordering.AtLimit = eh.OrderingParkAll
		s := e.start(cfg)
		evs := e.mpfes(4)
		for _, ev := range evs[2:] {
			md := ev.Payload.FailedMessageMetadata
			if ev.References.ErrorType.Code != avro.CodeParkedBehind || string(md.Headers[avro.ParkedHeadEntry]) != "overflow:orders/0@2" {
				t.Errorf("MPFE of %d: code %s head %q, want parked behind the overflow at 2", ev.References.Message.Offset,
					ev.References.ErrorType.Code, md.Headers[avro.ParkedHeadEntry])
			}
		}
		if got := l.succeeded()["b"]; len(got) != 0 {
			t.Fatalf("b handed over %v during the overflow", got)
		}
		if err := s.r.(clearer).ClearOrdering(context.Background(), testTopic, 0); err != nil {
			t.Fatal(err)
		}
		e.k.Produce(t, keyed("b:b4", "a:a5")...)
		waitFor(t, "records handed over after the clear", func() bool {
			ok := l.succeeded()
			return len(ok["a"]) == 1 && len(ok["b"]) == 1
		})
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		// The overflow is stored: a restart before the clear would have parked on.
		st := e.newOrderingStore()
		left, err := st.Load(context.Background(), testTopic, 0)
		if err != nil || len(left) != 0 {
			t.Errorf("stored state after the clear: %v, %v; want none", left, err)
		}
	})
}

// Environment of the ordering crash child (TestOrderingCrashChild).
const envOrderingChild = "EH_ORDERING_CHILD"

// TestOrderingGuardKillDuringRelease kills a consumer process (SIGKILL) in the middle of a
// release: the head's resend and the first parked record were handed over (and the guard's
// state says so), the handler is busy with the second when the process dies, nothing was ever
// committed. Its successor replays the
// partition from the start with the stored guard state: it does not hand over what was handed
// over already, parks nothing twice, and hands the rest of the chain over in order.
func TestOrderingGuardKillDuringRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		e.k.CreateTopic(t, testStateTopic, 1)
		e.k.Produce(t, keyed("a:a0", "a:a1", "b:b2", "a:a3", "a:a4", "b:b5", "a:a6")...)
		want := map[string][]string{
			"a": {"orders/0/0", "orders/0/1", "orders/0/3", "orders/0/4", "orders/0/6"},
			"b": {"orders/0/2", "orders/0/5"},
		}
		svc := e.startService(context.Background())
		group := "ordering-crash-" + string(a)
		child := exec.Command(os.Args[0], "-test.run=^TestOrderingCrashChild$", "-test.count=1")
		child.Env = append(os.Environ(), envOrderingChild+"="+string(a)+":"+group, envCrashBootstrap+"="+e.k.Bootstrap())
		out := &lines{}
		child.Stdout, child.Stderr = out, out
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- child.Wait() }()
		waitFor(t, "the child busy with the second parked record's resend", func() bool {
			select {
			case err := <-exited:
				t.Fatalf("the child exited early: %v\n%s", err, out.String())
			default:
			}
			return strings.Contains(out.String(), "BUSY orders/0/3")
		})
		// The guard writes in the background: kill once the release so far is stored (the head
		// resolved, the first parked record popped), as a crash after its acknowledgement.
		st := e.newOrderingStore()
		waitFor(t, "the child's release so far stored", func() bool {
			m, err := st.Load(context.Background(), testTopic, 0)
			var ent struct {
				Head  string `json:"h"`
				First int64  `json:"f"`
			}
			return err == nil && json.Unmarshal(m["ka"], &ent) == nil && ent.Head == "" && ent.First == 1
		})
		if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-exited
		if c := e.committed(group, 0); c > 0 {
			t.Fatalf("the killed child committed %d: the test needs a crash before any commit", c)
		}
		got := out.handled()
		if !slices.Equal(got["a"], want["a"][:2]) {
			t.Fatalf("the child handed over %v of key a before the kill, want %v", got["a"], want["a"][:2])
		}

		l := newLedger(nil)
		s := e.start(e.orderedConfig(group, l, e.newOrderingStore()))
		waitFor(t, "the rest of the chain handed over", func() bool { return len(l.succeeded()["a"]) >= 3 })
		waitFor(t, "the successor committed to the end", func() bool { return e.committed(group, 0) == e.k.EndOffsets(testTopic)[0] })
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		after := l.succeeded()
		if !slices.Equal(after["a"], want["a"][2:]) {
			t.Errorf("the successor handed over %v of key a, want exactly the rest of the chain %v", after["a"], want["a"][2:])
		}
		for k, ids := range after {
			got[k] = append(got[k], ids...)
		}
		checkOrder(t, got, want, true) // b is handled again: at least once
		if events, parked := svc.counts(); parked != 4 {
			t.Errorf("%d MPFEs, %d parked; want the 4 records behind the head parked once each (the replays stored once)", events, parked)
		}
	})
}

// lines collects a child's output.
type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// handled returns the child's "OK key identity" lines per key.
func (l *lines) handled() map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(l.String(), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "OK" {
			out[f[1]] = append(out[f[1]], f[2])
		}
	}
	return out
}

// TestOrderingCrashChild is the consumer process of TestOrderingGuardKillDuringRelease: the head
// orders/0/0 fails once; it prints every record handed over without error, and blocks forever
// in the handler on the resend of orders/0/3. It never commits.
func TestOrderingCrashChild(t *testing.T) {
	spec := os.Getenv(envOrderingChild)
	if spec == "" {
		t.Skip("runs only as the child of TestOrderingGuardKillDuringRelease")
	}
	a, group, _ := strings.Cut(spec, ":")
	bootstrap := os.Getenv(envCrashBootstrap)
	e := &env{t: t, a: adapter(a), reg: prometheus.NewRegistry()}
	var st orderingStore
	var err error
	if e.a == adapterConfluent {
		st, err = confluent.NewOrderingStore(e.confluentSettings(bootstrap), testStateTopic)
	} else {
		st, err = franz.NewOrderingStore(e.franzSettings(bootstrap), testStateTopic)
	}
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	failed := false
	h := eh.HandlerFunc[[]byte, string](func(ctx context.Context, rec eh.Record[[]byte, string]) error {
		id := identityOf(&rec.Message)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case id == "orders/0/0" && !failed:
			failed = true
			return errors.New("planned failure")
		case id == "orders/0/3":
			fmt.Printf("BUSY %s\n", id)
			<-ctx.Done() // until killed
			return ctx.Err()
		}
		fmt.Printf("OK %s %s\n", rec.Message.Key, id)
		return nil
	})
	cfg := eh.Config[[]byte, string]{
		GroupID: group, Topics: []string{testTopic}, System: "test-system", Service: "test-service",
		KeyDecoder: eh.Bytes(), ValueDecoder: stringDecoder(), Handler: h,
		ProcessPolicy:  eh.DeadLetter,
		FloodThreshold: -1,
		DeadLetter:     eh.DeadLetterConfig{ErrorTopic: testErrTopic, RetryBackoff: 20 * time.Millisecond},
		Ordering:       eh.Ordering{Topics: []string{testTopic}, Store: st},
		CommitInterval: time.Hour, // never commits before it is killed
		Metrics:        e.reg,
	}
	r, err := newRunnerAt(e, cfg, bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Run(context.Background()) // until killed
}

// resolver is what both adapters' Runners offer to resolve a head by hand.
type resolver interface {
	ResolveOrdering(ctx context.Context, topic string, partition int32, key []byte) error
}

// TestOrderingGuardOperatorResolvesHead: an operator gives up on a head that keeps failing (it
// is closed at the service) and resolves it at the consumer; the parked records are then
// resent in the wrong order, and the consumer hands them over in their original order (an
// early one is parked again as TEMPORARY, which the service resends by itself).
func TestOrderingGuardOperatorResolvesHead(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		e.k.CreateTopic(t, testStateTopic, 1)
		e.k.Produce(t, keyed("a:a0", "a:a1", "b:b2", "a:a3", "a:a4")...)
		ctx := context.Background()
		svc := e.startService(ctx)
		svc.setHold(true)
		l := newLedger(map[string]int{"orders/0/0": 1 << 30})
		s := e.start(e.orderedConfig("resolve-"+string(a), l, e.newOrderingStore()))
		waitFor(t, "the head and its 3 parked records at the service", func() bool { n, _ := svc.counts(); return n == 4 })
		svc.closeRow("orders/0/0")
		if err := s.r.(resolver).ResolveOrdering(ctx, testTopic, 0, []byte("a")); err != nil {
			t.Fatal(err)
		}
		if n := svc.resendParked(ctx, "a"); n != 3 {
			t.Fatalf("resent %d parked failures, want 3", n)
		}
		svc.setHold(false)
		waitFor(t, "the parked records handed over", func() bool { return len(l.succeeded()["a"]) == 3 })
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		checkOrder(t, l.succeeded(), map[string][]string{
			"a": {"orders/0/1", "orders/0/3", "orders/0/4"},
			"b": {"orders/0/2"},
		}, false)
	})
}

// TestOrderingGuardServiceDiesMidRelease: the service dies in the middle of resending a chain
// (the head and part of its parked records resent); a new instance rebuilds its state from the
// error topic and resends every failure again, the ones resent already included. The consumer
// drops the second resends of what it handed over while the key is guarded, and every key's
// records are handed over in offset order (a key already free may see a second resend again:
// at least once).
func TestOrderingGuardServiceDiesMidRelease(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		e.k.CreateTopic(t, testStateTopic, 1)
		rng := rand.New(rand.NewPCG(11, 24))
		w := newWorkload(4)
		e.produceWorkload(w, rng, 60, 1, 10)
		ctx, cancel := context.WithCancel(context.Background())
		first := e.startService(ctx)
		first.setHold(true)
		l := w.l
		s := e.start(e.orderedConfig("service-dies-"+string(a), l, e.newOrderingStore()))
		waitFor(t, "every record handed over or dead-lettered", func() bool {
			ev, _ := first.counts()
			return l.distinctOK()+ev >= w.total && ev > 0
		})
		first.dieAfter(3)
		first.setHold(false)
		waitFor(t, "the first instance dead in the middle of a chain", first.isDead)
		cancel()
		e.startService(context.Background())
		waitFor(t, "every record handled", func() bool { return l.distinctOK() == w.total })
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		checkOrder(t, l.succeeded(), w.want, true)
	})
}
