package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
)

// heldProducer keeps the MPFEs handed to it, with a copy of their bytes taken at the hand-over,
// until release reports them acknowledged: as a Kafka client that sends the bytes later would.
type heldProducer struct {
	mu       sync.Mutex
	report   func(*Job, error)
	held     []heldMPFE
	changed  []string // MPFEs whose bytes changed between the hand-over and the report
	jobs     map[*Job]int
	produced [][]byte
}

type heldMPFE struct {
	j                  *Job
	key, value         []byte
	keyCopy, valueCopy []byte
	offset             int64
}

func (h *heldProducer) Produce(j *Job, key, value []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = append(h.held, heldMPFE{j: j, key: key, value: value, keyCopy: bytes.Clone(key), valueCopy: bytes.Clone(value), offset: j.msg.Offset})
	h.jobs[j]++
	return nil
}

// release reports up to n held MPFEs, picked at random, as acknowledged.
func (h *heldProducer) release(rng *rand.Rand, n int) int {
	h.mu.Lock()
	rng.Shuffle(len(h.held), func(i, k int) { h.held[i], h.held[k] = h.held[k], h.held[i] })
	n = min(n, len(h.held))
	out := slices.Clone(h.held[len(h.held)-n:])
	h.held = h.held[:len(h.held)-n]
	for _, m := range out {
		if !bytes.Equal(m.key, m.keyCopy) || !bytes.Equal(m.value, m.valueCopy) || m.j.msg.Offset != m.offset {
			h.changed = append(h.changed, fmt.Sprintf("offset %d", m.offset))
		}
		h.produced = append(h.produced, m.valueCopy)
	}
	h.mu.Unlock()
	for _, m := range out {
		h.report(m.j, nil)
	}
	return n
}

func (h *heldProducer) Purge()              {}
func (h *heldProducer) Close(time.Duration) {}

// TestRecycledSlotsKeepTheirBytesUntilAcknowledged dead-letters records of an unguarded
// partition while their MPFEs are acknowledged in random order: a slot (with its event's
// buffer and texts) is recycled only after its record is final, so no MPFE's bytes change
// between the hand-over to the producer and the acknowledgement, every MPFE reports its own
// record, and the committable offset ends after the last record.
func TestRecycledSlotsKeepTheirBytesUntilAcknowledged(t *testing.T) {
	prod := &heldProducer{jobs: map[*Job]int{}}
	e, err := New(eh.Config[[]byte, []byte]{
		GroupID: "g", Topics: []string{"t"}, System: "s", Service: "s",
		ValueDecoder: eh.Bytes(), ProcessPolicy: eh.DeadLetter, FloodThreshold: -1,
		DeadLetter: eh.DeadLetterConfig{ErrorTopic: "e"},
		Metrics:    prometheus.NewRegistry(),
		Handler: eh.HandlerFunc[[]byte, []byte](func(_ context.Context, rec eh.Record[[]byte, []byte]) error {
			return fmt.Errorf("record %s: %w", rec.Value, errTest) // a trace of its own per record
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Open(func(report func(*Job, error)) (Producer, error) {
		prod.report = report
		return prod, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.Start()
	p := newPartition(TP{Topic: "t"}, e.met, e.sig)
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 3000
	done := make(chan struct{})
	released := make(chan int)
	go func() {
		// Acknowledges concurrently with the worker, in random batches.
		rng := rand.New(rand.NewPCG(5, 6))
		total := 0
		for {
			select {
			case <-done:
				released <- total
				return
			default:
			}
			total += prod.release(rng, 1+rng.IntN(40))
		}
	}()
	for off := range int64(n) {
		value := []byte(fmt.Sprintf("v%d", off))
		msg := eh.Message{Topic: "t", Offset: off, Key: []byte(fmt.Sprintf("k%d", rng.IntN(50))), Value: value,
			Headers: []eh.Header{{Key: "h", Value: value}}}
		e.handle(p, &msg)
	}
	close(done)
	total := <-released
	total += prod.release(rng, n)
	if total != n {
		t.Fatalf("%d MPFEs acknowledged, want %d", total, n)
	}
	if len(prod.changed) > 0 {
		t.Fatalf("MPFE bytes changed before their acknowledgement: %v", prod.changed[:min(5, len(prod.changed))])
	}
	if len(prod.jobs) >= n {
		t.Fatalf("%d jobs for %d records: no slot was recycled, the test tests nothing", len(prod.jobs), n)
	}
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	ids := map[string]bool{}
	for _, v := range prod.produced {
		ev, err := codec.DecodeEvent("e", v)
		if err != nil {
			t.Fatal(err)
		}
		off := ev.References.Message.Offset
		want := fmt.Sprintf("v%d", off)
		if string(ev.Payload.OriginalMessage) != want || ev.Payload.StackTrace == nil || !bytes.Contains([]byte(*ev.Payload.StackTrace), []byte("record "+want+":")) {
			t.Fatalf("MPFE of offset %d carries %q, trace %v", off, ev.Payload.OriginalMessage, ev.Payload.StackTrace)
		}
		if seen[off] || ids[ev.Identity.EventID] || ids[ev.Identity.IdempotenceID] {
			t.Fatalf("offset %d or its ids reported twice", off)
		}
		seen[off], ids[ev.Identity.EventID], ids[ev.Identity.IdempotenceID] = true, true, true
	}
	if len(seen) != n {
		t.Fatalf("%d records reported, want %d", len(seen), n)
	}
	if got := p.committable(); got != n {
		t.Fatalf("committable %d, want %d", got, n)
	}
}
