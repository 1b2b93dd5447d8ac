package errorhandler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/internal/kafkalog"
)

// Tuning of the poll loop.
const (
	// pollTimeout bounds how long the loop waits for a record, and so how fast it reacts to a
	// halt, a release or a dead-letter outcome.
	pollTimeout = 100 * time.Millisecond
	// burstSize is how many records are polled before they are handed to the workers.
	burstSize = 512
)

// Runner is a complete consumer: it owns the poll loop, rebalances, pausing and commits, hands
// each partition's records in order to the Handler, and applies the policies to failures.
type Runner[K, V any] struct {
	cfg      Config[K, V]
	handler  Handler[K, V]
	met      *metrics
	log      *slog.Logger
	throttle *throttle
	sem      chan struct{}

	started atomic.Bool
	running atomic.Bool
	stopped chan struct{} // closed when Run returns
	control chan releaseRequest
	dirty   atomic.Bool   // a partition's pause state may need to change
	ackCh   chan struct{} // notified when an MPFE outcome is final

	sig *runnerSignals

	dl *DeadLetterer // nil without an error topic; set before running is true

	partsMu sync.RWMutex
	parts   map[tpKey]*partition

	// Owned by the poll loop.
	consumer *kafka.Consumer
	staged   []*partition
	last     *partition
	flows    int // partitions paused for flow control
}

// New validates cfg and returns a Runner. Nothing connects before Run.
func New[K, V any](cfg Config[K, V]) (*Runner[K, V], error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if cfg.DeadLetter.ErrorTopic != "" {
		probe := cfg.DeadLetter
		if err := probe.setDefaults(); err != nil {
			return nil, fmt.Errorf("dead letter: %w", err)
		}
	}
	met, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	r := &Runner[K, V]{
		cfg:      cfg,
		handler:  chain(cfg.Handler, cfg.Middleware),
		met:      met,
		log:      cfg.Logger.With("component", "redrive.errorhandler", "group", cfg.GroupID),
		throttle: newThrottle(5*time.Second, cfg.Clock),
		sem:      make(chan struct{}, cfg.Concurrency),
		stopped:  make(chan struct{}),
		control:  make(chan releaseRequest),
		ackCh:    make(chan struct{}, 1),
		parts:    map[tpKey]*partition{},
	}
	r.sig = &runnerSignals{dirty: &r.dirty, ackCh: r.ackCh, blocked: met.blocked, clock: cfg.Clock}
	return r, nil
}

// Run consumes until ctx ends, then shuts down cleanly: it stops taking records, waits (at
// most ShutdownTimeout) for running handlers and in-flight MPFEs, commits every final offset and
// leaves the group. It returns nil after a clean shutdown, or an error when the consumer failed
// fatally or records were let go uncommitted. Run may be called once.
func (r *Runner[K, V]) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("run: the runner was already started")
	}
	defer close(r.stopped)
	if r.cfg.DeadLetter.ErrorTopic != "" {
		dl, err := NewDeadLetterer(r.cfg.DeadLetter)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		r.dl = dl
	}
	ccfg := r.cfg.consumerConfig()
	c, err := kafka.NewConsumer(&ccfg)
	if err != nil {
		r.closeDeadLetterer()
		return fmt.Errorf("run: new consumer: %w", err)
	}
	r.consumer = c
	kafkalog.Forward(r.log, "consumer", c.Logs())
	if err := c.SubscribeTopics(r.cfg.Topics, r.rebalance); err != nil {
		_ = c.Close()
		r.closeDeadLetterer()
		return fmt.Errorf("run: subscribe %v: %w", r.cfg.Topics, err)
	}
	r.running.Store(true)
	r.log.Info("consumer started", "topics", r.cfg.Topics)

	var fatal error
	nextCommit := time.Now().Add(r.cfg.CommitInterval)
	for ctx.Err() == nil && fatal == nil {
		fatal = r.pollBurst(c)
		r.flush()
		if r.dirty.Swap(false) || r.flows > 0 {
			r.reconcile(c)
		}
		r.serveControl(c)
		if now := time.Now(); !now.Before(nextCommit) {
			r.commit(c, r.assigned())
			nextCommit = now.Add(r.cfg.CommitInterval)
		}
	}
	r.running.Store(false)
	err = r.shutdown(c)
	return errors.Join(fatal, err)
}

// pollBurst polls up to burstSize events, waiting at most pollTimeout for the first.
func (r *Runner[K, V]) pollBurst(c *kafka.Consumer) error {
	timeout := int(pollTimeout / time.Millisecond)
	for range burstSize {
		ev := c.Poll(timeout)
		if ev == nil {
			return nil
		}
		timeout = 0
		switch e := ev.(type) {
		case *kafka.Message:
			r.dispatch(e)
		case kafka.Error:
			if e.IsFatal() {
				r.log.Error("consumer failed fatally", "error", e)
				return fmt.Errorf("consumer: %w", e)
			}
			if ok, n := r.throttle.allow("consumer-error"); ok {
				r.log.Warn("consumer error", "error", e, "suppressed", n)
			}
		}
	}
	return nil
}

// dispatch stages msg for its partition's worker.
func (r *Runner[K, V]) dispatch(msg *kafka.Message) {
	tp := msg.TopicPartition
	if tp.Error != nil {
		if ok, n := r.throttle.allow("consumer-error"); ok {
			r.log.Warn("consumer error", "error", tp.Error, "suppressed", n)
		}
		return
	}
	p := r.last
	if p == nil || p.key.partition != tp.Partition || p.key.topic != *tp.Topic {
		r.partsMu.RLock()
		p = r.parts[tpKey{topic: *tp.Topic, partition: tp.Partition}]
		r.partsMu.RUnlock()
		if p == nil {
			return // not assigned (any more)
		}
		r.last = p
	}
	off := int64(tp.Offset)
	if p.expect >= 0 && off < p.expect {
		return // fetched before a seek back
	}
	p.expect = off + 1
	p.stage = append(p.stage, msg)
	if !p.staged {
		p.staged = true
		r.staged = append(r.staged, p)
	}
}

// flush hands the staged records to the workers; a halted partition's are dropped (they are
// fetched again after its release).
func (r *Runner[K, V]) flush() {
	for i, p := range r.staged {
		r.staged[i] = nil
		p.staged = false
		p.mu.Lock()
		if p.halt == nil && !p.stopping.Load() {
			ep := p.epoch.Load()
			for _, m := range p.stage {
				p.queue = append(p.queue, item{msg: m, epoch: ep})
			}
		}
		queued := len(p.queue)
		p.mu.Unlock()
		clear(p.stage)
		p.stage = p.stage[:0]
		p.wake()
		if queued >= r.cfg.MaxBuffered && !p.flowPaused {
			p.flowPaused = true
			r.flows++
			r.dirty.Store(true)
		}
	}
	r.staged = r.staged[:0]
}

// reconcile pauses partitions that must wait (halted, error topic unwritable, too many records
// buffered) and resumes the others, seeking to the first record not handled yet.
func (r *Runner[K, V]) reconcile(c *kafka.Consumer) {
	for _, p := range r.assigned() {
		p.mu.Lock()
		halted, blocked, queued := p.halt != nil, p.failingSlots > 0, len(p.queue)
		p.mu.Unlock()
		if p.flowPaused && queued <= r.cfg.MaxBuffered/2 {
			p.flowPaused = false
			r.flows--
		}
		want := halted || blocked || p.flowPaused
		switch {
		case want && !p.paused:
			if err := c.Pause([]kafka.TopicPartition{p.tp}); err != nil {
				r.log.Error("pause partition", "topic", p.key.topic, "partition", p.key.partition, "error", err)
				continue
			}
			p.paused = true
		case !want && (p.paused || p.reseek):
			r.resume(c, p)
		}
	}
}

// resume resumes p at the first record it has not handled: where the poll loop left off, or,
// when records were dropped by a halt, after the last record the worker finished with.
func (r *Runner[K, V]) resume(c *kafka.Consumer, p *partition) {
	off := p.expect
	if p.reseek {
		off = p.next.Load()
	}
	if off >= 0 {
		tp := p.tp
		tp.Offset = kafka.Offset(off)
		res, err := c.SeekPartitions([]kafka.TopicPartition{tp})
		if err == nil && len(res) == 1 && res[0].Error != nil {
			err = res[0].Error
		}
		if err != nil {
			r.log.Error("seek partition before resuming; retrying", "topic", p.key.topic, "partition", p.key.partition, "offset", off, "error", err)
			r.dirty.Store(true)
			return
		}
		p.expect = off
	}
	p.reseek = false
	if err := c.Resume([]kafka.TopicPartition{p.tp}); err != nil {
		r.log.Error("resume partition; retrying", "topic", p.key.topic, "partition", p.key.partition, "error", err)
		r.dirty.Store(true)
		return
	}
	p.paused = false
	r.log.Info("partition resumed", "topic", p.key.topic, "partition", p.key.partition, "offset", off)
}

// assigned returns the assigned partitions.
func (r *Runner[K, V]) assigned() []*partition {
	r.partsMu.RLock()
	defer r.partsMu.RUnlock()
	out := make([]*partition, 0, len(r.parts))
	for _, p := range r.parts {
		out = append(out, p)
	}
	return out
}

// commit commits the final offsets of parts that moved since their last commit.
func (r *Runner[K, V]) commit(c *kafka.Consumer, parts []*partition) {
	var offs []kafka.TopicPartition
	var owners []*partition
	for _, p := range parts {
		off := p.committable()
		if off >= 0 && off > p.committed {
			tp := p.tp
			tp.Offset = kafka.Offset(off)
			offs = append(offs, tp)
			owners = append(owners, p)
		}
	}
	if len(offs) == 0 {
		return
	}
	res, err := c.CommitOffsets(offs)
	if err != nil {
		if ok, n := r.throttle.allow("commit"); ok {
			r.log.Warn("commit offsets; retrying at the next interval", "error", err, "suppressed", n)
		}
		return
	}
	for _, tp := range res {
		p := findOwner(owners, tp)
		switch {
		case p == nil:
		case tp.Error != nil:
			if ok, n := r.throttle.allow("commit"); ok {
				r.log.Warn("commit offset; retrying at the next interval", "topic", p.key.topic, "partition", p.key.partition, "error", tp.Error, "suppressed", n)
			}
		default:
			p.committed = int64(tp.Offset)
		}
	}
}

// rebalance is the consumer's rebalance callback; it runs inside Poll, on the poll loop.
func (r *Runner[K, V]) rebalance(c *kafka.Consumer, ev kafka.Event) error {
	cooperative := c.GetRebalanceProtocol() == "COOPERATIVE"
	r.log.Debug("rebalance event", "event", ev.String())
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		if !cooperative {
			// An eager assignment is the whole set: let go of anything not in it.
			keep := map[tpKey]bool{}
			for _, tp := range e.Partitions {
				if tp.Topic != nil {
					keep[tpKey{topic: *tp.Topic, partition: tp.Partition}] = true
				}
			}
			var gone []*partition
			for _, p := range r.assigned() {
				if !keep[p.key] {
					gone = append(gone, p)
				}
			}
			r.letGo(c, gone, true)
		}
		r.partsMu.Lock()
		for _, tp := range e.Partitions {
			if tp.Topic == nil || r.parts[tpKey{topic: *tp.Topic, partition: tp.Partition}] != nil {
				continue
			}
			p := newPartition(tp, r.met, r.sig)
			r.parts[p.key] = p
			go r.work(p)
		}
		r.partsMu.Unlock()
		r.log.Info("partitions assigned", "partitions", describeTPs(e.Partitions))
		var err error
		if cooperative {
			err = c.IncrementalAssign(e.Partitions)
		} else {
			err = c.Assign(e.Partitions)
		}
		if err != nil {
			r.log.Error("assign partitions", "error", err)
		}
	case kafka.RevokedPartitions:
		lost := c.AssignmentLost()
		r.letGo(c, r.lookupAll(e.Partitions), !lost)
		r.log.Info("partitions revoked", "partitions", describeTPs(e.Partitions), "lost", lost)
		var err error
		if cooperative {
			err = c.IncrementalUnassign(e.Partitions)
		} else {
			err = c.Unassign()
		}
		if err != nil {
			r.log.Error("unassign partitions", "error", err)
		}
	}
	return nil
}

func (r *Runner[K, V]) lookupAll(tps []kafka.TopicPartition) []*partition {
	r.partsMu.RLock()
	defer r.partsMu.RUnlock()
	var out []*partition
	for _, tp := range tps {
		if tp.Topic == nil {
			continue
		}
		if p := r.parts[tpKey{topic: *tp.Topic, partition: tp.Partition}]; p != nil {
			out = append(out, p)
		}
	}
	return out
}

// describeTPs lists partitions as "topic[p]" for logs.
func describeTPs(tps []kafka.TopicPartition) string {
	var b strings.Builder
	for i, tp := range tps {
		if i > 0 {
			b.WriteString(" ")
		}
		if tp.Topic != nil {
			b.WriteString(*tp.Topic)
		}
		fmt.Fprintf(&b, "[%d]", tp.Partition)
	}
	return b.String()
}

func findOwner(owners []*partition, tp kafka.TopicPartition) *partition {
	for _, p := range owners {
		if tp.Topic != nil && p.key.topic == *tp.Topic && p.key.partition == tp.Partition {
			return p
		}
	}
	return nil
}
