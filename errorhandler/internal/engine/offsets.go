package engine

import "sync"

// offsetTracker is the committable-offset bookkeeping of one partition. Records are handled in
// order; most become final at once (handled, skipped, filtered), and a dead-lettered one becomes
// final when its MPFE is acknowledged, possibly out of order. The committable offset is the
// first record not yet final: never past a record whose outcome is unknown.
//
// next is written by the partition's worker alone and read without a lock by the committer,
// which loads it before taking the lock that guards the in-flight queue; the worker adds a
// slot to the queue before it moves next past that slot, so a committer that sees the new next
// also sees the slot.
type offsetTracker struct {
	// inflight are the records whose outcome is pending, in offset order.
	inflight []*offsetSlot
}

// offsetSlot is one record whose outcome is pending: a dead-lettered record and its MPFE.
type offsetSlot struct {
	offset int64
	done   bool
	// failing is set while its MPFE's last attempt failed (the partition waits).
	failing bool
	p       *partition
	// pooled: the slot is recycled once it leaves the tracker (see newPooledSlot).
	pooled bool
	job    Job
}

// slotPool holds offset slots whose records are final, with their encode buffers.
var slotPool = sync.Pool{New: func() any { return &offsetSlot{pooled: true} }}

// maxPooledBuf is the largest encode buffer a recycled slot keeps.
const maxPooledBuf = 64 << 10

// newPooledSlot returns a recycled (or new) slot, to be recycled when its record is final:
// only for records that nothing outside their partition's tracker refers to after that
// (no ordering guard, no Delivery).
func newPooledSlot() *offsetSlot { return slotPool.Get().(*offsetSlot) }

// recycle resets s, a slot that left the tracker, and returns it to the pool. Whoever
// reports a job's outcome touches neither the job nor its bytes after the report, so the
// slot is free once its record is final.
func (s *offsetSlot) recycle() {
	buf, trace := s.job.buf, s.job.traceBuf
	if cap(buf) > maxPooledBuf {
		buf = nil
	}
	if cap(trace) > maxPooledBuf {
		trace = nil
	}
	*s = offsetSlot{pooled: true}
	s.job.buf, s.job.traceBuf = buf[:0], trace[:0]
	slotPool.Put(s)
}

// add appends s, a pending record; records are added in offset order.
func (t *offsetTracker) add(s *offsetSlot) {
	t.inflight = append(t.inflight, s)
}

// finish marks s final and drops the final records at the head of the queue.
func (t *offsetTracker) finish(s *offsetSlot) {
	s.done = true
	n := 0
	for n < len(t.inflight) && t.inflight[n].done {
		if t.inflight[n].pooled {
			t.inflight[n].recycle()
		}
		t.inflight[n] = nil
		n++
	}
	if n > 0 {
		t.inflight = t.inflight[n:]
		if len(t.inflight) == 0 {
			t.inflight = t.inflight[:0:0]
		}
	}
}

// committable returns the offset to commit given next, the offset after the last record the
// worker finished with: the first pending record's offset, else next. -1 means nothing to
// commit yet.
func (t *offsetTracker) committable(next int64) int64 {
	if len(t.inflight) > 0 {
		return t.inflight[0].offset
	}
	return next
}

// firstFailing returns the pending slot of the lowest offset whose MPFE's last attempt
// failed, other than s; nil when there is none.
func (t *offsetTracker) firstFailing(s *offsetSlot) *offsetSlot {
	for _, o := range t.inflight {
		if o != nil && o != s && !o.done && o.failing {
			return o
		}
	}
	return nil
}

// pending returns the number of records whose outcome is pending.
func (t *offsetTracker) pending() int {
	n := 0
	for _, s := range t.inflight {
		if !s.done {
			n++
		}
	}
	return n
}
