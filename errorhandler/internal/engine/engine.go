// Package engine is the client-agnostic machinery of the errorhandler middleware: partitions
// with their workers, policies, the decode hook, in-place retries, halts and releases, the
// flood guard, health, metrics, MPFE building and publishing, and the per-partition offset
// tracking that lets dead-lettering be pipelined, and the read side of the ordering guard's
// store on a compacted topic (StoreView). The adapters (errorhandler/confluent and
// errorhandler/franz) own the Kafka client: they run the poll loop, hand records to the
// Engine, and carry out its pause, resume, seek and commit requests through a Consumer.
package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	eh "github.com/redrive/redrive/errorhandler"
)

// Consumer is what the Engine asks of the adapter's consumer. Its methods are called on the
// poll loop only (from Engine.Tick, Engine.Revoke and Engine.Shutdown).
type Consumer interface {
	// Pause stops fetching tp.
	Pause(tp TP) error
	// Resume resumes fetching tp at offset. When dropped is true, records at or after offset
	// were fetched and dropped (a halt), so the consumer must seek to offset; otherwise offset
	// is where its fetch position already is (a pause for flow control or for the error topic
	// drops nothing) and seeking is optional. offset is -1 before the first record.
	Resume(tp TP, offset int64, dropped bool) error
	// Commit commits the offsets synchronously and sets each entry's Err; an error return
	// means none was committed.
	Commit(offsets []CommitOffset) error
}

// CommitOffset is a partition's offset to commit: the offset of the first record whose
// outcome is not final.
type CommitOffset struct {
	TP
	Offset int64
	Err    error
}

// Engine is the client-agnostic part of a Runner. The poll loop (one goroutine) calls Dispatch,
// Flush, Tick, Assign, Revoke and Shutdown; Health, Release and HealthHandler may be called
// from anywhere.
type Engine[K, V any] struct {
	cfg      eh.Config[K, V]
	handler  eh.Handler[K, V]
	met      *Metrics
	log      *slog.Logger
	throttle *throttle
	sem      chan struct{}

	opened  atomic.Bool // set by Open: a Runner runs once
	running atomic.Bool
	stopped chan struct{} // closed by Stopped
	control chan releaseRequest
	dirty   atomic.Bool   // a partition's pause state may need to change
	ackCh   chan struct{} // notified when an MPFE outcome is final
	drained chan struct{} // notified when a worker drained its queue to half (see Flush)

	sig *runnerSignals

	dl *DeadLetterer // nil without an error topic; set before running is true

	partsMu sync.RWMutex
	parts   map[TP]*partition

	// Owned by the poll loop.
	staged     []*partition
	last       *partition
	flows      int // partitions paused for flow control
	nextCommit time.Time
}

// New validates cfg (see errorhandler.Config.SetDefaults) and returns an Engine.
func New[K, V any](cfg eh.Config[K, V]) (*Engine[K, V], error) {
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	met, err := NewMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	e := &Engine[K, V]{
		cfg:      cfg,
		handler:  eh.Chain(cfg.Handler, cfg.Middleware...),
		met:      met,
		log:      cfg.Logger.With("component", "redrive.errorhandler", "group", cfg.GroupID),
		throttle: newThrottle(5*time.Second, cfg.Clock),
		sem:      make(chan struct{}, cfg.Concurrency),
		stopped:  make(chan struct{}),
		control:  make(chan releaseRequest),
		ackCh:    make(chan struct{}, 1),
		drained:  make(chan struct{}, 1),
		parts:    map[TP]*partition{},
	}
	e.sig = &runnerSignals{dirty: &e.dirty, wake: make(chan struct{}, 1), ackCh: e.ackCh, blocked: met.blocked, clock: cfg.Clock}
	return e, nil
}

// Config returns the validated configuration.
func (e *Engine[K, V]) Config() eh.Config[K, V] { return e.cfg }

// Logger returns the engine's logger.
func (e *Engine[K, V]) Logger() *slog.Logger { return e.log }

// Throttle reports whether a log line for key may be written now, and how many were
// suppressed since the last one that was.
func (e *Engine[K, V]) Throttle(key string) (bool, int) { return e.throttle.allow(key) }

// Open begins a Runner's Run: a second Run is refused, and the DeadLetterer is built with
// newProducer when an error topic is configured (nil otherwise). When Open returns nil, the
// caller defers Stopped; a Run that cannot start its consumer then calls CloseDeadLetterer.
func (e *Engine[K, V]) Open(newProducer NewProducerFunc) (*DeadLetterer, error) {
	if !e.opened.CompareAndSwap(false, true) {
		return nil, errors.New("run: the runner was already started")
	}
	if e.cfg.DeadLetter.ErrorTopic == "" {
		return nil, nil
	}
	dl, err := NewDeadLetterer(e.cfg.DeadLetter, newProducer)
	if err != nil {
		e.Stopped()
		return nil, fmt.Errorf("run: dead letter: %w", err)
	}
	e.dl = dl
	return dl, nil
}

// Start marks the engine running, dead-lettering through the DeadLetterer of Open.
func (e *Engine[K, V]) Start() {
	e.nextCommit = time.Now().Add(e.cfg.CommitInterval)
	e.running.Store(true)
}

// Stopped marks the engine stopped for good: Release then fails with ErrNotRunning.
func (e *Engine[K, V]) Stopped() {
	e.running.Store(false)
	close(e.stopped)
}

// Dispatch stages msg for its partition's worker; Flush hands staged records over.
func (e *Engine[K, V]) Dispatch(msg *eh.Message) {
	p := e.last
	if p == nil || p.key.Partition != msg.Partition || p.key.Topic != msg.Topic {
		e.partsMu.RLock()
		p = e.parts[TP{Topic: msg.Topic, Partition: msg.Partition}]
		e.partsMu.RUnlock()
		if p == nil {
			return // not assigned (any more)
		}
		e.last = p
	}
	off := msg.Offset
	if p.expect >= 0 && off < p.expect {
		return // fetched before a seek back
	}
	p.expect = off + 1
	// Stamped now: a halt (on the worker) bumps the epoch, and a release runs on the poll
	// loop, never between Dispatch and Flush.
	p.stage = append(p.stage, item{msg: *msg, epoch: p.epoch.Load()})
	if !p.staged {
		p.staged = true
		e.staged = append(e.staged, p)
	}
}

// Flush hands the staged records to the workers; a halted partition's are dropped (they are
// fetched again after its release).
//
// A partition whose queue reached MaxBuffered is given flowGrace to drain to half before it is
// paused: pausing makes the client drop what it fetched for the partition and fetch it again,
// so a worker that is only briefly behind (it shares the CPU with the client's decoding) must
// not cost a refetch; a partition whose worker is really stuck (a slow handler, a long in-place
// backoff) is paused, and the others go on.
func (e *Engine[K, V]) Flush() {
	var over []*partition
	for i, p := range e.staged {
		e.staged[i] = nil
		p.staged = false
		p.mu.Lock()
		if p.halt == nil && !p.stopping.Load() {
			if len(p.queue) == 0 {
				// The worker took everything: hand the staged slice over as it is, and stage
				// the next records in the queue's array, or in the one the worker set free
				// (the arrays circulate: staged, queued, handled, spare).
				p.queue, p.stage = p.stage, p.queue
				if cap(p.stage) == 0 {
					p.stage, p.free = p.free, nil
				}
			} else {
				p.queue = append(p.queue, p.stage...)
			}
		}
		if len(p.queue) >= e.cfg.MaxBuffered && !p.flowPaused {
			// Under p.mu: the worker reads the queue's length under it before it clears
			// flowWaiting, so it cannot miss this.
			p.flowWaiting.Store(true)
			over = append(over, p)
		}
		p.mu.Unlock()
		clear(p.stage)
		p.stage = p.stage[:0]
		p.wake()
	}
	handed := len(e.staged) > 0
	e.staged = e.staged[:0]
	if !handed {
		return
	}
	// Let the workers run now rather than at the next preemption: the poll loop would
	// otherwise hand over poll after poll while a woken worker waits for a CPU.
	runtime.Gosched()
	if len(over) == 0 {
		return
	}
	e.awaitDrain(over)
	for _, p := range over {
		if p.flowWaiting.Load() {
			p.flowPaused = true
			e.flows++
			e.dirty.Store(true)
		}
	}
}

// flowGrace is how long Flush waits for a partition whose queue reached MaxBuffered to drain
// to half before it pauses the partition.
const flowGrace = 50 * time.Millisecond

// awaitDrain waits at most flowGrace until the workers of over drained their queues to half
// (each clears its flowWaiting).
func (e *Engine[K, V]) awaitDrain(over []*partition) {
	var timer *time.Timer
	for {
		waiting := false
		for _, p := range over {
			if p.flowWaiting.Load() && !p.stopping.Load() {
				waiting = true
				break
			}
		}
		if !waiting {
			return
		}
		if timer == nil {
			timer = time.NewTimer(flowGrace)
			defer timer.Stop()
		}
		select {
		case <-e.drained:
		case <-timer.C:
			return
		}
	}
}

// Wake is signalled when the poll loop should run Tick before its poll times out: a partition
// must be paused or may be resumed. An adapter whose poll can be interrupted selects on it.
func (e *Engine[K, V]) Wake() <-chan struct{} { return e.sig.wake }

// Tick does the poll loop's periodic work: pauses and resumes partitions whose state changed,
// serves release requests, and commits final offsets every CommitInterval (see CommitDue).
func (e *Engine[K, V]) Tick(c Consumer) {
	e.Reconcile(c)
	e.CommitDue(c)
}

// Reconcile pauses and resumes partitions whose state changed and serves release requests.
// It runs on the poll loop.
func (e *Engine[K, V]) Reconcile(c Consumer) {
	if e.dirty.Swap(false) || e.flows > 0 {
		e.reconcile(c)
	}
	e.serveControl(c)
}

// CommitDue commits the final offsets of the assigned partitions when CommitInterval has
// passed since the last time. It may run outside the poll loop's exclusive section, but not
// concurrently with itself: an adapter whose rebalance callbacks run on another goroutine calls
// it without holding the lock that serializes them, since a synchronous commit may wait for a
// rebalance that waits for such a callback.
func (e *Engine[K, V]) CommitDue(c Consumer) {
	if now := time.Now(); !now.Before(e.nextCommit) {
		e.commit(c, e.assigned())
		e.nextCommit = now.Add(e.cfg.CommitInterval)
	}
}

// reconcile pauses partitions that must wait (halted, error topic unwritable, too many records
// buffered) and resumes the others, seeking to the first record not handled yet.
func (e *Engine[K, V]) reconcile(c Consumer) {
	for _, p := range e.assigned() {
		p.mu.Lock()
		halted, blocked, queued := p.halt != nil, p.failingSlots > 0, len(p.queue)
		p.mu.Unlock()
		if p.flowPaused && queued <= e.cfg.MaxBuffered/2 {
			p.flowPaused = false
			p.flowWaiting.Store(false)
			e.flows--
		}
		want := halted || blocked || p.flowPaused
		switch {
		case want && !p.paused:
			if err := c.Pause(p.key); err != nil {
				e.log.Error("pause partition", "topic", p.key.Topic, "partition", p.key.Partition, "error", err)
				continue
			}
			p.paused = true
		case !want && (p.paused || p.reseek):
			e.resume(c, p)
		}
	}
}

// resume resumes p at the first record it has not handled: where the poll loop left off, or,
// when records were dropped by a halt, after the last record the worker finished with.
func (e *Engine[K, V]) resume(c Consumer, p *partition) {
	off := p.expect
	if p.reseek {
		off = p.next.Load()
	}
	if err := c.Resume(p.key, off, p.reseek); err != nil {
		e.log.Error("resume partition; retrying", "topic", p.key.Topic, "partition", p.key.Partition, "offset", off, "error", err)
		e.dirty.Store(true)
		return
	}
	if off >= 0 {
		p.expect = off
	}
	p.reseek = false
	p.paused = false
	e.log.Info("partition resumed", "topic", p.key.Topic, "partition", p.key.Partition, "offset", off)
}

// assigned returns the assigned partitions.
func (e *Engine[K, V]) assigned() []*partition {
	e.partsMu.RLock()
	defer e.partsMu.RUnlock()
	out := make([]*partition, 0, len(e.parts))
	for _, p := range e.parts {
		out = append(out, p)
	}
	return out
}

// Assigned returns the assigned partitions.
func (e *Engine[K, V]) Assigned() []TP {
	e.partsMu.RLock()
	defer e.partsMu.RUnlock()
	out := make([]TP, 0, len(e.parts))
	for tp := range e.parts {
		out = append(out, tp)
	}
	return out
}

// Assign starts a worker for every partition of tps not assigned yet.
func (e *Engine[K, V]) Assign(tps []TP) {
	e.partsMu.Lock()
	defer e.partsMu.Unlock()
	for _, tp := range tps {
		if e.parts[tp] != nil {
			continue
		}
		p := newPartition(tp, e.met, e.sig)
		e.attachGuard(p)
		e.parts[tp] = p
		go e.work(p)
	}
	e.awaitGuards(tps)
}

// Revoke lets go of the assigned partitions among tps (see letGo); commit is false when the
// assignment was lost. It returns the number of records given up uncommitted.
func (e *Engine[K, V]) Revoke(c Consumer, tps []TP, commit bool) int {
	e.partsMu.RLock()
	var parts []*partition
	for _, tp := range tps {
		if p := e.parts[tp]; p != nil {
			parts = append(parts, p)
		}
	}
	e.partsMu.RUnlock()
	return e.letGo(c, parts, commit)
}

// commit commits the final offsets of parts that moved since their last commit.
func (e *Engine[K, V]) commit(c Consumer, parts []*partition) {
	var offs []CommitOffset
	var owners []*partition
	for _, p := range parts {
		off := p.committable()
		if off >= 0 && off > p.committed.Load() {
			offs = append(offs, CommitOffset{TP: p.key, Offset: off})
			owners = append(owners, p)
		}
	}
	if len(offs) == 0 {
		return
	}
	if err := c.Commit(offs); err != nil {
		if ok, n := e.throttle.allow("commit"); ok {
			e.log.Warn("commit offsets; retrying at the next interval", "error", err, "suppressed", n)
		}
		return
	}
	for i, o := range offs {
		p := owners[i]
		if o.Err != nil {
			if ok, n := e.throttle.allow("commit"); ok {
				e.log.Warn("commit offset; retrying at the next interval", "topic", p.key.Topic, "partition", p.key.Partition, "error", o.Err, "suppressed", n)
			}
			continue
		}
		p.committed.Store(o.Offset)
	}
}

// Shutdown lets go of every partition (committing what is final) and closes the dead-letter
// producer. The adapter closes its consumer afterwards.
func (e *Engine[K, V]) Shutdown(c Consumer) error {
	e.running.Store(false)
	e.log.Info("shutting down")
	givenUp := e.letGo(c, e.assigned(), true)
	var errs []error
	if err := e.CloseDeadLetterer(); err != nil {
		errs = append(errs, err)
	}
	if givenUp > 0 {
		errs = append(errs, fmt.Errorf("shutdown: %d dead-lettered records not acknowledged within %v were left uncommitted", givenUp, e.cfg.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
