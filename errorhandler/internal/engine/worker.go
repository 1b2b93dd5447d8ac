package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
)

// semaphoreChunk is how many records a worker handles before it lets another partition's worker
// take its Concurrency slot.
const semaphoreChunk = 256

// work is the worker of partition p: it handles p's queued records in order until p stops.
func (e *Engine[K, V]) work(p *partition) {
	defer close(p.done)
	if p.guard != nil && !e.loadGuard(p) {
		return
	}
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
			e.sem <- struct{}{}
			for i := start; i < end; i++ {
				if p.stopping.Load() || batch[i].epoch != p.epoch.Load() {
					batch[i] = item{}
					continue
				}
				if e.handle(p, &batch[i].msg) {
					handled++
				}
				batch[i] = item{}
			}
			<-e.sem
		}
		if handled > 0 {
			p.handled.Add(float64(handled))
		}
		p.mu.Lock()
		if p.spare == nil {
			p.spare = batch[:0]
		} else if p.free == nil {
			p.free = batch[:0]
		}
		queued := len(p.queue)
		p.mu.Unlock()
		if queued <= e.cfg.MaxBuffered/2 && p.flowWaiting.CompareAndSwap(true, false) {
			select {
			case e.drained <- struct{}{}:
			default:
			}
			e.sig.markDirty()
		}
	}
}

// process handles one record. It reports whether the handler processed it without error. The
// caller holds a Concurrency slot.
func (e *Engine[K, V]) process(p *partition, msg *eh.Message) bool {
	off := msg.Offset
	topic := p.key.Topic
	if e.filtered(msg) {
		e.met.failure(phaseFilter, eh.OutcomeFiltered, topic)
		p.next.Store(off + 1)
		return false
	}
	rec := eh.Record[K, V]{Message: *msg, Tombstone: msg.Value == nil}
	if e.cfg.KeyDecoder != nil && msg.Key != nil {
		k, err := decodeSafe(e.cfg.KeyDecoder, topic, msg.Key)
		if err != nil {
			de := &eh.DecodeError{Part: eh.PartKey, Topic: topic, Partition: p.key.Partition, Offset: off, Data: msg.Key, Err: err}
			if _, ok := e.decodeFailed(p, msg, de); !ok {
				return false
			}
		} else {
			rec.Key = k
		}
	}
	if !rec.Tombstone {
		v, err := decodeSafe(e.cfg.ValueDecoder, topic, msg.Value)
		if err != nil {
			de := &eh.DecodeError{Part: eh.PartValue, Topic: topic, Partition: p.key.Partition, Offset: off, Data: msg.Value, Err: err}
			sub, ok := e.decodeFailed(p, msg, de)
			if !ok {
				return false
			}
			v, rec.Substituted = sub, true
		}
		rec.Value = v
	}
	for rec.Attempt = 1; ; rec.Attempt++ {
		err := e.call(p.ctx, rec)
		if err == nil {
			p.next.Store(off + 1)
			if p.consecutive.Load() != 0 {
				p.consecutive.Store(0)
				p.consecGauge.Set(0)
			}
			return true
		}
		if p.ctx.Err() != nil {
			// The partition is being let go: the handler was interrupted, not the record at
			// fault. It stays uncommitted for the next owner.
			return false
		}
		if rec.Attempt < e.cfg.Retry.Attempts && e.retryable(err) {
			p.retried.Inc()
			if !e.backoff(p, rec.Attempt) {
				return false // let go while waiting: the record stays uncommitted
			}
			continue
		}
		inPlace := 0
		if e.cfg.Retry.Enabled() {
			inPlace = rec.Attempt
		}
		e.fail(p, msg, eh.PhaseProcess, err, inPlace)
		return false
	}
}

// retryable reports whether a failed handler call is retried in place.
func (e *Engine[K, V]) retryable(err error) bool {
	if e.cfg.Retry.Retryable != nil {
		return e.cfg.Retry.Retryable(err)
	}
	return eh.ClassifyWith(e.cfg.DeadLetter.Classifier, eh.PhaseProcess, err).Temporality == avro.Temporary
}

// backoff waits before in-place retry attempt+1: Retry.Backoff doubled per retry, capped at
// Retry.MaxBackoff, with ±20% jitter. It gives up its Concurrency slot meanwhile, so that
// other partitions keep going; the partition's later records wait in order. It returns false
// when the partition is let go while waiting.
func (e *Engine[K, V]) backoff(p *partition, attempt int) bool {
	delay := e.cfg.Retry.Backoff
	for i := 1; i < attempt && delay < e.cfg.Retry.MaxBackoff; i++ {
		delay *= 2
	}
	delay = min(delay, e.cfg.Retry.MaxBackoff)
	delay = time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))
	<-e.sem
	t := time.NewTimer(delay)
	defer t.Stop()
	ok := false
	select {
	case <-t.C:
		ok = true
	case <-p.quit:
	case <-p.ctx.Done():
	}
	e.sem <- struct{}{}
	return ok
}

// filtered reports whether msg is a resend meant for another service.
func (e *Engine[K, V]) filtered(msg *eh.Message) bool {
	target, found := msg.HeaderValue(avro.HeaderTargetService)
	return found && string(target) != e.cfg.Service
}

// decodeFailed runs the decode hook for de. It returns a substitute value and true when the
// hook substituted one; otherwise the record's outcome is settled (skipped, or the decode
// policy applied) and it returns false.
func (e *Engine[K, V]) decodeFailed(p *partition, msg *eh.Message, de *eh.DecodeError) (V, bool) {
	var zero V
	d := eh.Raise()
	if e.cfg.OnDecodeError != nil {
		d = e.runHook(de)
	}
	if d.Skips() {
		e.skip(p, msg, failure{phase: eh.PhaseDecode, err: de}, "decode hook")
		return zero, false
	}
	value, substitutes := d.Substitutes()
	if !substitutes {
		e.fail(p, msg, eh.PhaseDecode, de, 0)
		return zero, false
	}
	if de.Part == eh.PartKey {
		err := fmt.Errorf("%w: %w", eh.ErrKeySubstitution, de)
		e.log.Error("decode hook tried to substitute a key; refused, the decode policy applies",
			"topic", de.Topic, "partition", de.Partition, "offset", de.Offset, "error", err)
		e.fail(p, msg, eh.PhaseDecode, err, 0)
		return zero, false
	}
	v, ok := value.(V)
	if !ok && value != nil {
		err := fmt.Errorf("%w: got %T, want %T: %w", eh.ErrSubstitutionType, value, zero, de)
		e.log.Error("decode hook substituted a value of the wrong type; refused, the decode policy applies",
			"topic", de.Topic, "partition", de.Partition, "offset", de.Offset, "error", err)
		e.fail(p, msg, eh.PhaseDecode, err, 0)
		return zero, false
	}
	e.met.failure(string(eh.PhaseDecode), eh.OutcomeSubstituted, de.Topic)
	if ok, n := e.throttle.allow("substitute:" + de.Topic); ok {
		e.log.Warn("undecodable value substituted by the decode hook",
			"topic", de.Topic, "partition", de.Partition, "offset", de.Offset,
			"error", de.Err, "sample", sample(de.Data), "suppressed", n)
	}
	return v, true
}

// runHook calls the decode hook; a panicking hook raises.
func (e *Engine[K, V]) runHook(de *eh.DecodeError) (d eh.Decision) {
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("decode hook panicked; the decode policy applies", "topic", de.Topic,
				"partition", de.Partition, "offset", de.Offset, "panic", fmt.Sprint(v))
			d = eh.Raise()
		}
	}()
	return e.cfg.OnDecodeError(de)
}

// fail applies the phase's policy to a failed record (and the flood guard). inPlace is the
// number of handler calls made in place (0 when in-place retries are not configured).
func (e *Engine[K, V]) fail(p *partition, msg *eh.Message, phase Phase, err error, inPlace int) {
	f := classifyFailure(e.cfg.DeadLetter.Classifier, phase, err)
	n := p.consecutive.Add(1)
	p.consecGauge.Set(float64(n))
	policy := e.cfg.ProcessPolicy
	if phase == eh.PhaseDecode {
		policy = e.cfg.DecodePolicy
	}
	if policy != eh.Fail && e.cfg.FloodThreshold > 0 && n > int64(e.cfg.FloodThreshold) {
		e.halt(p, msg, f, inPlace, eh.ReasonFlood)
		return
	}
	switch policy {
	case eh.Skip:
		e.skip(p, msg, f, "policy")
	case eh.DeadLetter:
		e.deadLetter(p, msg, f, inPlace)
	default:
		e.halt(p, msg, f, inPlace, eh.ReasonFailure)
	}
}

// skip drops a record: its outcome is final at once.
func (e *Engine[K, V]) skip(p *partition, msg *eh.Message, f failure, by string) {
	off := msg.Offset
	e.met.failure(string(f.phase), eh.OutcomeSkipped, p.key.Topic)
	if f.phase == eh.PhaseDecode && by == "decode hook" {
		n := p.consecutive.Add(1)
		p.consecGauge.Set(float64(n))
	}
	p.next.Store(off + 1)
	if ok, n := e.throttle.allow(fmt.Sprintf("skip:%s:%d", p.key.Topic, p.key.Partition)); ok {
		e.log.Warn("record skipped", "topic", p.key.Topic, "partition", p.key.Partition, "offset", off,
			"phase", string(f.phase), "by", by, "error", f.err, "suppressed", n)
	}
}

// halt stops partition p at msg: nothing after it is handled or committed until an operator
// releases it.
func (e *Engine[K, V]) halt(p *partition, msg *eh.Message, f failure, inPlace int, reason string) {
	now := e.cfg.Clock()
	p.mu.Lock()
	p.halt = &haltState{msg: *msg, f: f, inPlace: inPlace, reason: reason, since: now}
	p.epoch.Add(1)
	clear(p.queue)
	p.queue = p.queue[:0]
	p.mu.Unlock()
	e.met.failure(string(f.phase), eh.OutcomeHalted, p.key.Topic)
	e.met.halted.Inc()
	attrs := []any{"topic", p.key.Topic, "partition", p.key.Partition, "offset", msg.Offset,
		"phase", string(f.phase), "reason", reason, "code", f.class.Code, "error", f.err}
	if f.phase == eh.PhaseDecode {
		var de *eh.DecodeError
		if errors.As(f.err, &de) {
			attrs = append(attrs, "sample", sample(de.Data))
		}
	}
	e.log.Error("partition halted; release it with skip or dead-letter", attrs...)
	e.sig.markDirty()
}

// deadLetter publishes msg's MPFE; msg's offset becomes final when the MPFE is acknowledged.
func (e *Engine[K, V]) deadLetter(p *partition, msg *eh.Message, f failure, inPlace int) {
	off := msg.Offset
	var s *offsetSlot
	if p.guard == nil {
		// Nothing outside the partition keeps an unguarded slot once its record is final:
		// it is recycled, with its event's buffer (see offsetTracker.finish).
		s = newPooledSlot()
		s.offset, s.p = off, p
	} else {
		s = &offsetSlot{offset: off, p: p}
	}
	e.dl.initJob(&s.job, msg, f, inPlace, s)
	if p.guard != nil && !e.guardDeadLetter(p, msg, &s.job) {
		return
	}
	p.mu.Lock()
	p.track.add(s)
	p.mu.Unlock()
	p.next.Store(off + 1) // after the slot is queued: see offsetTracker
	e.dl.submit(&s.job)
}

// jobDone records the final outcome of the slot's MPFE. A nil err means acknowledged;
// otherwise it was given up (the partition was let go) and the record stays uncommitted.
func (s *offsetSlot) jobDone(j *Job, err error) {
	p := s.p
	if err == nil {
		if j.f.phase == eh.PhaseDecode {
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
		} else if p.blockedSlot == s {
			p.blockedSlot = p.track.firstFailing(s)
		}
	}
	if err == nil {
		p.track.finish(s)
	}
	p.mu.Unlock()
	if wasFailing {
		p.sig.markDirty()
	}
	select {
	case p.sig.ackCh <- struct{}{}:
	default:
	}
}

// jobFailing marks the slot's partition as waiting for the error topic: it is paused until
// the MPFE gets through.
func (s *offsetSlot) jobFailing(j *Job, err error) {
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
	p.sig.markDirty()
}

// call runs the handler, turning a panic into a *errorhandler.PanicError.
func (e *Engine[K, V]) call(ctx context.Context, rec eh.Record[K, V]) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError(v)
		}
	}()
	return e.handler.Handle(ctx, rec)
}

// decodeSafe runs a decoder, turning a panic into a *errorhandler.PanicError.
func decodeSafe[T any](d eh.Decoder[T], topic string, data []byte) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = newPanicError(p)
		}
	}()
	return d.Decode(topic, data)
}

// newPanicError captures the stack of a recovered panic. It must be called by the deferred
// function that recovered.
func newPanicError(v any) *eh.PanicError {
	return &eh.PanicError{Value: v, Stack: debug.Stack(), Site: panicSite()}
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
