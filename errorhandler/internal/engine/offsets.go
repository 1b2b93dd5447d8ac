package engine

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
	job     Job
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
