package conformance

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/confluent"
	"github.com/redrive/redrive/errorhandler/franz"
	"github.com/redrive/redrive/store"
)

const testStateTopic = "orders.ordering"

// orderingStore is what both adapters' ordering stores offer.
type orderingStore interface {
	eh.OrderingStore
	Close()
}

// clearer is what both adapters' Runners offer for the ordering guard.
type clearer interface {
	ClearOrdering(ctx context.Context, topic string, partition int32) error
}

// newOrderingStore returns the adapter's Kafka ordering store on the env's state topic,
// creating the topic on first use.
func (e *env) newOrderingStore() orderingStore {
	e.t.Helper()
	var (
		s   orderingStore
		err error
	)
	switch e.a {
	case adapterConfluent:
		s, err = confluent.NewOrderingStore(e.confluentSettings(e.k.Bootstrap()), testStateTopic)
	default:
		s, err = franz.NewOrderingStore(e.franzSettings(e.k.Bootstrap()), testStateTopic)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Close)
	return s
}

// orderedConfig returns a config with the ordering guard on for the test topic.
func (e *env) orderedConfig(group string, h eh.Handler[[]byte, string], st eh.OrderingStore) eh.Config[[]byte, string] {
	cfg := e.config(group, h)
	cfg.ProcessPolicy = eh.DeadLetter
	cfg.DecodePolicy = eh.DeadLetter
	cfg.FloodThreshold = -1
	cfg.Ordering = eh.Ordering{Topics: []string{testTopic}, Store: st}
	return cfg
}

// identityOf returns a record's causing-message identity as the service computes it.
func identityOf(m *eh.Message) string {
	if o, ok := m.HeaderValue(avro.HeaderOrigin); ok {
		return string(o)
	}
	return store.TopicPartitionOffset(m.Topic, m.Partition, m.Offset)
}

// offsetOf returns the original offset named by an identity "topic/partition/offset".
func offsetOf(id string) int64 {
	n, _ := strconv.ParseInt(id[strings.LastIndexByte(id, '/')+1:], 10, 64)
	return n
}

// call is one handler call seen by a ledger.
type call struct {
	key string
	id  string
	ok  bool
}

// ledger is a handler that fails a record's first plan[id] (or byValue[value]) calls and
// records every call.
type ledger struct {
	mu      sync.Mutex
	plan    map[string]int // identity -> failing calls
	byValue map[string]int // value -> failing calls
	calls   []call
	tries   map[string]int
}

func newLedger(plan map[string]int) *ledger {
	return &ledger{plan: plan, byValue: map[string]int{}, tries: map[string]int{}}
}

// failValue makes the first n calls for records with value v fail.
func (l *ledger) failValue(v string, n int) {
	l.mu.Lock()
	l.byValue[v] = n
	l.mu.Unlock()
}

func (l *ledger) Handle(_ context.Context, rec eh.Record[[]byte, string]) error {
	id := identityOf(&rec.Message)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tries[id]++
	ok := l.tries[id] > l.plan[id]+l.byValue[rec.Value]
	l.calls = append(l.calls, call{key: string(rec.Message.Key), id: id, ok: ok})
	if !ok {
		return fmt.Errorf("planned failure %d of %s", l.tries[id], id)
	}
	return nil
}

// succeeded returns, per key, the identities handled without error, in the order handled.
func (l *ledger) succeeded() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for _, c := range l.calls {
		if c.ok {
			out[c.key] = append(out[c.key], c.id)
		}
	}
	return out
}

// distinctOK returns the number of identities handled without error at least once.
func (l *ledger) distinctOK() int {
	seen := map[string]bool{}
	for _, ids := range l.succeeded() {
		for _, id := range ids {
			seen[id] = true
		}
	}
	return len(seen)
}

// checkOrder fails t unless, for every key of want (its identities in offset order), the
// identities handled without error are exactly want's (first occurrences, when dups allows
// the replays of a crash), in that order.
func checkOrder(t *testing.T, got map[string][]string, want map[string][]string, dups bool) {
	t.Helper()
	for key, ids := range want {
		seq := got[key]
		if dups {
			seen := map[string]bool{}
			var first []string
			for _, id := range seq {
				if !seen[id] {
					seen[id] = true
					first = append(first, id)
				}
			}
			seq = first
		}
		if !slices.Equal(seq, ids) {
			t.Errorf("key %s: handled %v, want %v", key, seq, ids)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("key %s handled but never produced", key)
		}
	}
}

// row is a failure as the simulated service keeps it.
type row struct {
	ev       *avro.Event
	id       string // causing-message identity
	key      string
	parked   bool
	headRef  string
	resent   bool
	due      bool // to be resent on its own (a temporary row, or parked behind a resent head)
	released bool // resent with the release header
}

// service simulates the redrive service's part of the ordering guard: it reads the error topic,
// keeps the failures, and resends a head followed by the failures parked behind it (same
// partition and key, waiting, in offset order); a parked failure that is temporary, or whose
// head was already resent, is resent on its own.
type service struct {
	t     *testing.T
	e     *env
	codec *avro.Codec
	cl    *kgo.Client
	prod  *kgo.Client

	mu     sync.Mutex
	rows   []*row
	latest map[string]*row // identity -> its latest row
	events int
	hold   bool // while set, nothing is resent
	resent int
	// budget, when positive, is how many more records this instance resends before it dies in
	// the middle of a chain (nothing more is resent); 0 means no limit.
	budget int
	dead   bool
}

func (e *env) startService(ctx context.Context) *service {
	e.t.Helper()
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	brokers := strings.Split(e.k.Bootstrap(), ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(testErrTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(20*time.Millisecond))
	if err != nil {
		e.t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		e.t.Fatal(err)
	}
	s := &service{t: e.t, e: e, codec: codec, cl: cl, prod: prod, latest: map[string]*row{}}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.read(ctx) }()
	go func() { defer wg.Done(); s.resendLoop(ctx) }()
	e.t.Cleanup(func() { cancel(); wg.Wait(); cl.Close(); prod.Close() })
	return s
}

func (s *service) read(ctx context.Context) {
	for ctx.Err() == nil {
		fs := s.cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			ev, err := s.codec.DecodeEvent(testErrTopic, r.Value)
			if err != nil {
				s.t.Errorf("MPFE does not decode: %v", err)
				return
			}
			s.add(ev)
		})
	}
}

func (s *service) add(ev *avro.Event) {
	md := ev.Payload.FailedMessageMetadata
	hs, _ := md.OriginalHeaders()
	r := &row{ev: ev, id: store.CausingMessage(ev, hs), key: string(ev.Payload.OriginalKey)}
	if ev.References.ErrorType.Code == avro.CodeParkedBehind {
		r.parked = true
		r.headRef = string(md.Headers[avro.ParkedHeadEntry])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events++
	if prev := s.latest[r.id]; prev != nil && prev.ev.Identity.IdempotenceID == ev.Identity.IdempotenceID {
		return // the same failure again (a replay after a crash): stored once
	}
	switch {
	case r.parked && ev.References.ErrorType.Temporality == avro.Temporary:
		r.due = true
	case r.parked:
		if h := s.latest[r.headRef]; h != nil && h.resent {
			r.due = true // its head left already: it would wait for nothing
		}
	default:
		r.due = true // a head: resent (with its chain) on the scheduler's next round
	}
	s.rows = append(s.rows, r)
	s.latest[r.id] = r
}

func (s *service) resendLoop(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.round(ctx)
	}
}

// round resends the due rows: a head followed by its chain, or a due parked row alone.
func (s *service) round(ctx context.Context) {
	s.mu.Lock()
	if s.hold || s.dead {
		s.mu.Unlock()
		return
	}
	var batches [][]*row
	for _, r := range s.rows {
		if r.resent || !r.due {
			continue
		}
		batch := []*row{r}
		r.resent = true
		if !r.parked {
			var chain []*row
			for _, c := range s.rows {
				if c.parked && !c.resent && !c.due && c.key == r.key && c.ev.References.Message.Partition == r.ev.References.Message.Partition {
					chain = append(chain, c)
				}
			}
			slices.SortFunc(chain, func(a, b *row) int {
				return cmp.Compare(a.ev.References.Message.Offset, b.ev.References.Message.Offset)
			})
			for _, c := range chain {
				c.resent = true
			}
			batch = append(batch, chain...)
		}
		batches = append(batches, batch)
	}
	s.resent += len(batches)
	budget := s.budget
	s.mu.Unlock()
	for _, b := range batches {
		recs := make([]*kgo.Record, len(b))
		for i, r := range b {
			recs[i] = resendRecord(r)
		}
		if budget > 0 {
			if len(recs) >= budget {
				recs = recs[:budget]
				s.mu.Lock()
				s.dead = true // killed in the middle of this chain
				s.mu.Unlock()
			}
			budget -= len(recs)
			s.mu.Lock()
			s.budget = max(budget, 1)
			s.mu.Unlock()
		}
		if err := s.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil && ctx.Err() == nil {
			s.t.Errorf("resend: %v", err)
		}
		if s.isDead() {
			return
		}
	}
}

// isDead reports whether the instance died in the middle of a chain.
func (s *service) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// dieAfter makes the instance die after resending n more records.
func (s *service) dieAfter(n int) {
	s.mu.Lock()
	s.budget = n
	s.mu.Unlock()
}

// resendRecord is r's original record as the service resends it.
func resendRecord(r *row) *kgo.Record {
	hs, _ := r.ev.Payload.FailedMessageMetadata.OriginalHeaders()
	rec := &kgo.Record{Topic: testTopic, Partition: r.ev.References.Message.Partition,
		Key: r.ev.Payload.OriginalKey, Value: r.ev.Payload.OriginalMessage}
	for _, h := range hs {
		switch h.Name {
		case avro.HeaderOrigin, avro.HeaderTargetService, avro.HeaderErrorHandlingService:
			continue
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Name, Value: h.Value})
	}
	rec.Headers = append(rec.Headers,
		kgo.RecordHeader{Key: avro.HeaderTargetService, Value: []byte("test-service")},
		kgo.RecordHeader{Key: avro.HeaderErrorHandlingService, Value: []byte("redrive")},
		kgo.RecordHeader{Key: avro.HeaderOrigin, Value: []byte(r.id)})
	return rec
}

// setHold stops (true) or resumes (false) resending.
func (s *service) setHold(v bool) {
	s.mu.Lock()
	s.hold = v
	s.mu.Unlock()
}

// counts returns the number of MPFEs read and of parked ones among them.
func (s *service) counts() (events, parked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rows {
		if r.parked {
			parked++
		}
	}
	return s.events, parked
}

// closeRow closes the latest failure of id (it is never resent).
func (s *service) closeRow(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.latest[id]; r != nil {
		r.resent = true
	}
}

// resendParked resends the waiting failures parked on key, in the reverse of their order (the
// consumer must put them back in order), and marks them resent.
func (s *service) resendParked(ctx context.Context, key string) int {
	s.mu.Lock()
	var recs []*kgo.Record
	for i := len(s.rows) - 1; i >= 0; i-- {
		if r := s.rows[i]; r.parked && !r.resent && r.key == key {
			r.resent = true
			recs = append(recs, resendRecord(r))
		}
	}
	s.mu.Unlock()
	if err := s.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		s.t.Errorf("resend: %v", err)
	}
	return len(recs)
}
