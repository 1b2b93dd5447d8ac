package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/errorhandler"
)

// TP names a partition of a topic.
type TP struct {
	Topic     string
	Partition int32
}

// haltState is a halted partition's record and why it halted.
type haltState struct {
	msg     errorhandler.Message
	f       failure
	inPlace int // handler calls made in place (0: in-place retries not configured)
	reason  string
	since   time.Time
}

// item is a record queued for a partition's worker, stamped with the partition's epoch when
// it was queued: a halt bumps the epoch, and the worker drops records of an older epoch.
type item struct {
	msg   errorhandler.Message
	epoch uint64
}

// partition is the state of one assigned partition. Its worker goroutine handles its records in
// order; the poll loop queues records, pauses, resumes and commits.
type partition struct {
	key TP

	// Written by the worker (and by a release while the worker is idle), read anywhere.
	next        atomic.Int64 // offset after the last record the worker finished with; -1 before
	epoch       atomic.Uint64
	consecutive atomic.Int64
	stopping    atomic.Bool
	// flowWaiting is set when the partition's queue reached MaxBuffered, and while it is then
	// paused for flow control (see Engine.Flush): the worker wakes
	// the poll loop when it has drained its queue to half.
	flowWaiting atomic.Bool

	mu           sync.Mutex
	queue        []item
	spare        []item
	free         []item // an array the worker is done with, for the poll loop's staging
	halt         *haltState
	track        offsetTracker
	failingSlots int // in-flight MPFEs whose last attempt failed: the partition waits
	blockedSince time.Time
	blockedErr   string
	blockedSlot  *offsetSlot
	blockedPhase Phase

	signal chan struct{} // wakes the worker; capacity 1
	quit   chan struct{} // closed when the worker must stop taking records
	done   chan struct{} // closed when the worker has returned
	ctx    context.Context
	cancel context.CancelFunc

	// Owned by the poll loop.
	stage      []item
	staged     bool
	expect     int64 // next offset to queue; -1 before the first record
	paused     bool
	flowPaused bool
	// reseek is set by a release: the partition resumes after the released record, not where
	// the poll loop left off (records after a halt were dropped).
	reseek bool

	// committed is the last committed offset (-1 before); commits may run outside the poll
	// loop (see Engine.CommitDue).
	committed atomic.Int64

	sig *runnerSignals

	guard *guard // the ordering guard, on a guarded topic; owned by the worker

	handled      prometheus.Counter
	retried      prometheus.Counter
	consecGauge  prometheus.Gauge
	deadLettered [2]prometheus.Counter // by phase: decode, process
}

// runnerSignals is what a partition's MPFE outcomes tell the engine.
type runnerSignals struct {
	dirty   *atomic.Bool  // a partition's pause state may need to change
	wake    chan struct{} // wakes the poll loop early (capacity 1)
	ackCh   chan struct{} // notified when an MPFE outcome is final
	blocked prometheus.Gauge
	clock   func() time.Time
}

// markDirty notes that a partition's pause state may need to change and wakes the poll loop.
func (s *runnerSignals) markDirty() {
	s.dirty.Store(true)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func newPartition(tp TP, met *Metrics, sig *runnerSignals) *partition {
	p := &partition{
		key:    tp,
		signal: make(chan struct{}, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
		expect: -1,
		sig:    sig,
	}
	p.next.Store(-1)
	p.committed.Store(-1)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.handled = met.handled.WithLabelValues(tp.Topic)
	p.retried = met.inPlaceRetries.WithLabelValues(tp.Topic)
	p.consecGauge = met.consecutive.WithLabelValues(tp.Topic, partitionLabel(tp.Partition))
	p.deadLettered[0] = met.failures.WithLabelValues(string(errorhandler.PhaseDecode), string(errorhandler.OutcomeDeadLettered), tp.Topic)
	p.deadLettered[1] = met.failures.WithLabelValues(string(errorhandler.PhaseProcess), string(errorhandler.OutcomeDeadLettered), tp.Topic)
	return p
}

// committable returns the offset that may be committed now, or -1.
func (p *partition) committable() int64 {
	next := p.next.Load() // before the lock: see offsetTracker
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.track.committable(next)
}

// wake signals the worker without blocking.
func (p *partition) wake() {
	select {
	case p.signal <- struct{}{}:
	default:
	}
}
