package engine

import (
	"context"
	"time"
)

// letGo releases parts (revoke or shutdown): their workers stop taking records, running
// handlers and in-flight MPFEs get until ShutdownTimeout to finish, what is final is committed
// (unless commit is false: the assignment was lost), and the rest is given up uncommitted. It
// returns the number of records given up.
func (r *Engine[K, V]) letGo(c Consumer, parts []*partition, commit bool) int {
	if len(parts) == 0 {
		return 0
	}
	deadline := time.NewTimer(r.cfg.ShutdownTimeout)
	defer deadline.Stop()
	expired := false
	for _, p := range parts {
		p.stopping.Store(true)
		close(p.quit)
	}
	for _, p := range parts {
		if expired {
			p.cancel()
			continue
		}
		select {
		case <-p.done:
		case <-deadline.C:
			expired = true
			p.cancel()
			r.log.Warn("handler still running after the shutdown timeout; its record stays uncommitted",
				"topic", p.key.Topic, "partition", p.key.Partition)
		}
	}
	r.log.Debug("letting go: workers stopped", "partitions", len(parts), "expired", expired)
	for !expired && pendingMPFEs(parts) > 0 {
		select {
		case <-r.ackCh:
		case <-deadline.C:
			expired = true
		}
	}
	r.log.Debug("letting go: MPFEs final", "expired", expired)
	if commit {
		r.commit(c, parts)
	}
	r.log.Debug("letting go: committed")
	givenUp := 0
	r.partsMu.Lock()
	for _, p := range parts {
		delete(r.parts, p.key)
		if r.last == p {
			r.last = nil
		}
		p.cancel()
		p.mu.Lock()
		for _, s := range p.track.inflight {
			if s != nil && !s.done {
				givenUp++
				r.dl.cancel(&s.job, errCancelled)
			}
		}
		if p.halt != nil {
			r.met.halted.Dec()
		}
		if p.failingSlots > 0 {
			r.met.blocked.Dec()
			p.failingSlots = 0
		}
		p.mu.Unlock()
		if p.flowPaused {
			r.flows--
		}
		r.met.consecutive.DeleteLabelValues(p.key.Topic, partitionLabel(p.key.Partition))
		r.dropGuard(p)
	}
	r.partsMu.Unlock()
	if givenUp > 0 {
		r.log.Warn("let go of partitions with MPFEs not acknowledged; their records stay uncommitted",
			"partitions", len(parts), "records", givenUp)
	}
	return givenUp
}

func pendingMPFEs(parts []*partition) int {
	n := 0
	for _, p := range parts {
		p.mu.Lock()
		n += p.track.pending()
		p.mu.Unlock()
	}
	return n
}

// CloseDeadLetterer closes the dead-letter producer, waiting at most 5s for MPFEs in flight.
func (r *Engine[K, V]) CloseDeadLetterer() error {
	if r.dl == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.dl.Close(ctx)
}
