package engine

import (
	"sync"

	eh "github.com/redrive/redrive/errorhandler"
)

// guardWriter writes a partition's guard changes to its store in the order they were made,
// several at once when they queue up, so that the worker does not wait for the store: a
// change's done function runs once it is acknowledged. The records whose outcome depends on a
// change (a parked or head record's MPFE, a handed-over resend) stay uncommitted until then.
type guardWriter struct {
	mu      sync.Mutex
	queue   []guardSave
	running bool
}

// guardSave is one queued change: its records, and what to do once they are stored.
type guardSave struct {
	recs []eh.OrderingRecord
	done func()
}

// enqueueSave queues recs for p's store; done (optional) runs once they are acknowledged.
func (e *Engine[K, V]) enqueueSave(p *partition, recs []eh.OrderingRecord, done func()) {
	p.guard.reportSize(p) // every change of the guard is saved: its size is current here
	w := &p.guard.writer
	w.mu.Lock()
	w.queue = append(w.queue, guardSave{recs: recs, done: done})
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go e.writeGuard(p)
	}
}

// writeGuard writes the queued changes until the queue is empty, retrying a failed write
// until the partition is dropped (its dependent records then stay uncommitted).
func (e *Engine[K, V]) writeGuard(p *partition) {
	w := &p.guard.writer
	for {
		w.mu.Lock()
		batch := w.queue
		w.queue = nil
		if len(batch) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		var recs []eh.OrderingRecord
		for _, s := range batch {
			recs = append(recs, s.recs...)
		}
		for attempt := 1; len(recs) > 0; attempt++ {
			err := p.guard.store.Save(p.ctx, p.key.Topic, p.key.Partition, recs...)
			if err == nil {
				break
			}
			if !e.guardRetryWait(p, attempt, err) {
				w.mu.Lock()
				w.running = false
				w.queue = nil
				w.mu.Unlock()
				return
			}
		}
		for _, s := range batch {
			if s.done != nil {
				s.done()
			}
		}
	}
}

// finishHold finishes a slot that held a record's offset until its guard change was stored.
func finishHold(s *offsetSlot) {
	p := s.p
	p.mu.Lock()
	p.track.finish(s)
	p.mu.Unlock()
	select {
	case p.sig.ackCh <- struct{}{}:
	default:
	}
}
