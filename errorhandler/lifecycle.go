package errorhandler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// letGo releases parts (revoke or shutdown): their workers stop taking records, running
// handlers and in-flight MPFEs get until ShutdownTimeout to finish, what is final is committed
// (unless commit is false: the assignment was lost), and the rest is given up uncommitted. It
// returns the number of records given up.
func (r *Runner[K, V]) letGo(c *kafka.Consumer, parts []*partition, commit bool) int {
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
				"topic", p.key.topic, "partition", p.key.partition)
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
		r.met.consecutive.DeleteLabelValues(p.key.topic, partitionLabel(p.key.partition))
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

// shutdown lets go of every partition, closes the consumer and the dead-letter producer.
func (r *Runner[K, V]) shutdown(c *kafka.Consumer) error {
	r.log.Info("shutting down")
	givenUp := r.letGo(c, r.assigned(), true)
	var errs []error
	if err := c.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close consumer: %w", err))
	}
	if err := r.closeDeadLetterer(); err != nil {
		errs = append(errs, err)
	}
	if givenUp > 0 {
		errs = append(errs, fmt.Errorf("shutdown: %d dead-lettered records not acknowledged within %v were left uncommitted", givenUp, r.cfg.ShutdownTimeout))
	}
	r.log.Info("consumer stopped")
	return errors.Join(errs...)
}

func (r *Runner[K, V]) closeDeadLetterer() error {
	if r.dl == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.dl.Close(ctx)
}
