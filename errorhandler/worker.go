package errorhandler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/redrive/redrive/avro"
)

// semaphoreChunk is how many records a worker handles before it lets another partition's worker
// take its Concurrency slot.
const semaphoreChunk = 256

// work is the worker of partition p: it handles p's queued records in order until p stops.
func (r *Runner[K, V]) work(p *partition) {
	defer close(p.done)
	for {
		select {
		case <-p.signal:
		case <-p.quit:
			return
		}
		p.mu.Lock()
		batch := p.queue
		p.queue, p.spare = p.spare[:0], nil
		p.mu.Unlock()

		handled := 0
		for start := 0; start < len(batch); start += semaphoreChunk {
			end := min(start+semaphoreChunk, len(batch))
			r.sem <- struct{}{}
			for i := start; i < end; i++ {
				it := batch[i]
				batch[i] = item{}
				if p.stopping.Load() || it.epoch != p.epoch.Load() {
					continue
				}
				if r.process(p, it.msg) {
					handled++
				}
			}
			<-r.sem
		}
		if handled > 0 {
			p.handled.Add(float64(handled))
		}
		p.mu.Lock()
		if p.spare == nil {
			p.spare = batch[:0]
		}
		p.mu.Unlock()
	}
}

// process handles one record. It reports whether the handler processed it without error.
func (r *Runner[K, V]) process(p *partition, msg *kafka.Message) bool {
	off := int64(msg.TopicPartition.Offset)
	topic := p.key.topic
	if r.filtered(msg) {
		r.met.failure(phaseFilter, OutcomeFiltered, topic)
		p.next.Store(off + 1)
		return false
	}
	rec := Record[K, V]{Message: msg, Tombstone: msg.Value == nil}
	if r.cfg.KeyDecoder != nil && msg.Key != nil {
		k, err := decodeSafe(r.cfg.KeyDecoder, topic, msg.Key)
		if err != nil {
			de := &DecodeError{Part: PartKey, Topic: topic, Partition: p.key.partition, Offset: off, Data: msg.Key, Err: err}
			if _, ok := r.decodeFailed(p, msg, de); !ok {
				return false
			}
		} else {
			rec.Key = k
		}
	}
	if !rec.Tombstone {
		v, err := decodeSafe(r.cfg.ValueDecoder, topic, msg.Value)
		if err != nil {
			de := &DecodeError{Part: PartValue, Topic: topic, Partition: p.key.partition, Offset: off, Data: msg.Value, Err: err}
			sub, ok := r.decodeFailed(p, msg, de)
			if !ok {
				return false
			}
			v, rec.Substituted = sub, true
		}
		rec.Value = v
	}
	err := r.call(p.ctx, rec)
	if err == nil {
		p.next.Store(off + 1)
		if p.consecutive.Load() != 0 {
			p.consecutive.Store(0)
			p.consecGauge.Set(0)
		}
		return true
	}
	if p.ctx.Err() != nil {
		// The partition is being let go: the handler was interrupted, not the record at fault.
		// It stays uncommitted for the next owner.
		return false
	}
	r.fail(p, msg, PhaseProcess, err)
	return false
}

// filtered reports whether msg is a resend meant for another service.
func (r *Runner[K, V]) filtered(msg *kafka.Message) bool {
	var target []byte
	found := false
	for i := range msg.Headers {
		if msg.Headers[i].Key == avro.HeaderTargetService {
			target, found = msg.Headers[i].Value, true
		}
	}
	return found && string(target) != r.cfg.Service
}

// decodeFailed runs the decode hook for de. It returns a substitute value and true when the
// record goes on to the handler with it; false when the record was dealt with.
func (r *Runner[K, V]) decodeFailed(p *partition, msg *kafka.Message, de *DecodeError) (V, bool) {
	var zero V
	d := Raise()
	if r.cfg.OnDecodeError != nil {
		d = r.runHook(de)
	}
	switch d.kind {
	case decideSkip:
		r.skip(p, msg, failure{phase: PhaseDecode, err: de}, "decode hook")
		return zero, false
	case decideSubstitute:
		if de.Part == PartKey {
			err := fmt.Errorf("%w: %w", ErrKeySubstitution, de)
			r.log.Error("decode hook tried to substitute a key; refused, the decode policy applies",
				"topic", de.Topic, "partition", de.Partition, "offset", de.Offset, "error", err)
			r.fail(p, msg, PhaseDecode, err)
			return zero, false
		}
		v, ok := d.value.(V)
		if !ok && d.value != nil {
			err := fmt.Errorf("%w: got %T, want %T: %w", ErrSubstitutionType, d.value, zero, de)
			r.log.Error("decode hook substituted a value of the wrong type; refused, the decode policy applies",
				"topic", de.Topic, "partition", de.Partition, "offset", de.Offset, "error", err)
			r.fail(p, msg, PhaseDecode, err)
			return zero, false
		}
		r.met.failure(string(PhaseDecode), OutcomeSubstituted, de.Topic)
		if ok, n := r.throttle.allow("substitute:" + de.Topic); ok {
			r.log.Warn("undecodable value substituted by the decode hook",
				"topic", de.Topic, "partition", de.Partition, "offset", de.Offset,
				"error", de.Err, "sample", sample(de.Data), "suppressed", n)
		}
		return v, true
	default:
		r.fail(p, msg, PhaseDecode, de)
		return zero, false
	}
}

// runHook calls the decode hook; a panicking hook raises.
func (r *Runner[K, V]) runHook(de *DecodeError) (d Decision) {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("decode hook panicked; the decode policy applies", "topic", de.Topic,
				"partition", de.Partition, "offset", de.Offset, "panic", fmt.Sprint(v))
			d = Raise()
		}
	}()
	return r.cfg.OnDecodeError(de)
}

// fail applies the phase's policy to a failed record (and the flood guard).
func (r *Runner[K, V]) fail(p *partition, msg *kafka.Message, phase Phase, err error) {
	f := classifyFailure(r.cfg.DeadLetter.Classifier, phase, err)
	n := p.consecutive.Add(1)
	p.consecGauge.Set(float64(n))
	policy := r.cfg.ProcessPolicy
	if phase == PhaseDecode {
		policy = r.cfg.DecodePolicy
	}
	if policy != Fail && r.cfg.FloodThreshold > 0 && n > int64(r.cfg.FloodThreshold) {
		r.halt(p, msg, f, ReasonFlood)
		return
	}
	switch policy {
	case Skip:
		r.skip(p, msg, f, "policy")
	case DeadLetter:
		r.deadLetter(p, msg, f)
	default:
		r.halt(p, msg, f, ReasonFailure)
	}
}

func classifyFailure(cl Classifier, phase Phase, err error) failure {
	def := DefaultClassification(phase, err)
	c := def
	if cl != nil {
		c = cl(phase, err, def).orDefault(def)
	}
	return failure{phase: phase, err: err, class: c}
}

// skip drops a record: its outcome is final at once.
func (r *Runner[K, V]) skip(p *partition, msg *kafka.Message, f failure, by string) {
	off := int64(msg.TopicPartition.Offset)
	r.met.failure(string(f.phase), OutcomeSkipped, p.key.topic)
	if f.phase == PhaseDecode && by == "decode hook" {
		n := p.consecutive.Add(1)
		p.consecGauge.Set(float64(n))
	}
	p.next.Store(off + 1)
	if ok, n := r.throttle.allow(fmt.Sprintf("skip:%s:%d", p.key.topic, p.key.partition)); ok {
		r.log.Warn("record skipped", "topic", p.key.topic, "partition", p.key.partition, "offset", off,
			"phase", string(f.phase), "by", by, "error", f.err, "suppressed", n)
	}
}

// halt stops partition p at msg: nothing after it is handled or committed until an operator
// releases it.
func (r *Runner[K, V]) halt(p *partition, msg *kafka.Message, f failure, reason string) {
	now := r.cfg.Clock()
	p.mu.Lock()
	p.halt = &haltState{msg: msg, f: f, reason: reason, since: now}
	p.epoch.Add(1)
	clear(p.queue)
	p.queue = p.queue[:0]
	p.mu.Unlock()
	r.met.failure(string(f.phase), OutcomeHalted, p.key.topic)
	r.met.halted.Inc()
	attrs := []any{"topic", p.key.topic, "partition", p.key.partition, "offset", int64(msg.TopicPartition.Offset),
		"phase", string(f.phase), "reason", reason, "code", f.class.Code, "error", f.err}
	if f.phase == PhaseDecode {
		var de *DecodeError
		if errors.As(f.err, &de) {
			attrs = append(attrs, "sample", sample(de.Data))
		}
	}
	r.log.Error("partition halted; release it with skip or dead-letter", attrs...)
	r.dirty.Store(true)
}

// deadLetter publishes msg's MPFE; msg's offset becomes final when the MPFE is acknowledged.
func (r *Runner[K, V]) deadLetter(p *partition, msg *kafka.Message, f failure) {
	off := int64(msg.TopicPartition.Offset)
	s := &offsetSlot{offset: off, p: p}
	r.dl.initJob(&s.job, msg, f, s)
	p.mu.Lock()
	p.track.add(s)
	p.mu.Unlock()
	p.next.Store(off + 1) // after the slot is queued: see offsetTracker
	r.dl.submit(&s.job)
}

// jobDone records the final outcome of the slot's MPFE. A nil err means acknowledged;
// otherwise it was given up (the partition was let go) and the record stays uncommitted.
func (s *offsetSlot) jobDone(j *job, err error) {
	p := s.p
	if err == nil {
		if j.f.phase == PhaseDecode {
			p.deadLettered[0].Inc()
		} else {
			p.deadLettered[1].Inc()
		}
	}
	p.mu.Lock()
	wasFailing := s.failing
	if s.failing {
		s.failing = false
		p.failingSlots--
		if p.failingSlots == 0 {
			p.sig.blocked.Dec()
			p.blockedSlot = nil
		}
	}
	if err == nil {
		p.track.finish(s)
	}
	p.mu.Unlock()
	if wasFailing {
		p.sig.dirty.Store(true)
	}
	select {
	case p.sig.ackCh <- struct{}{}:
	default:
	}
}

// jobFailing marks the slot's partition as waiting for the error topic: it is paused until
// the MPFE gets through.
func (s *offsetSlot) jobFailing(j *job, err error) {
	p := s.p
	now := p.sig.clock()
	p.mu.Lock()
	if !s.failing {
		s.failing = true
		p.failingSlots++
		if p.failingSlots == 1 {
			p.blockedSince = now
			p.sig.blocked.Inc()
		}
	}
	if p.blockedSlot == nil || s.offset <= p.blockedSlot.offset {
		p.blockedSlot, p.blockedPhase = s, j.f.phase
	}
	p.blockedErr = err.Error()
	p.mu.Unlock()
	p.sig.dirty.Store(true)
}

// call runs the handler, turning a panic into a *PanicError.
func (r *Runner[K, V]) call(ctx context.Context, rec Record[K, V]) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError(v)
		}
	}()
	return r.handler.Handle(ctx, rec)
}

// decodeSafe runs a decoder, turning a panic into a *PanicError.
func decodeSafe[T any](d Decoder[T], topic string, data []byte) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = newPanicError(p)
		}
	}()
	return d.Decode(topic, data)
}

// newPanicError captures the stack of a recovered panic. It must be called by the deferred
// function that recovered.
func newPanicError(v any) *PanicError {
	return &PanicError{Value: v, Stack: debug.Stack(), Site: panicSite()}
}

// panicSite returns "function:line" of the frame that panicked: the first frame below
// runtime.gopanic that is not in the runtime.
func panicSite() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	seenPanic := false
	for {
		fr, more := frames.Next()
		if seenPanic && !strings.HasPrefix(fr.Function, "runtime.") {
			return fmt.Sprintf("%s:%d", fr.Function, fr.Line)
		}
		if fr.Function == "runtime.gopanic" {
			seenPanic = true
		}
		if !more {
			return "unknown"
		}
	}
}
