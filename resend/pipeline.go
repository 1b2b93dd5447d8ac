package resend

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/store"
)

// markMaxBatches bounds one RESENT mark: it combines the ids of at most this many acknowledged
// batches into one UPDATE.
const markMaxBatches = 4

// roundStats counts the outcomes of one round.
type roundStats struct {
	claimed, resent, failed, exhausted int
}

func (r *roundStats) add(o roundStats) {
	r.claimed += o.claimed
	r.resent += o.resent
	r.failed += o.failed
	r.exhausted += o.exhausted
}

// round claims, sends and marks due failures until none is left or ctx ends. It is a pipeline
// of three stages, so that the database and the broker work at the same time:
//
//   - one claimer claims batch after batch in due order, each claim starting after the last
//     row of the one before (store.DueCursor), until a claim is not full;
//   - Concurrency senders each produce one batch and wait for its acknowledgements; a batch
//     that is acknowledged goes to the marker, and the sender takes the next batch at once;
//   - one marker marks the acknowledged rows RESENT, combining the batches that are waiting
//     (up to markMaxBatches) into one statement.
//
// The rows stay leased to this instance from the claim until the mark, so no other instance
// sends them meanwhile. The queues between the stages are bounded (Concurrency batches each),
// so when the database falls behind the claims wait, and at most about 3 × Concurrency + 4
// batches are acknowledged and not yet marked. When ctx ends the claimer stops; the batches
// already claimed are sent and every acknowledged row is marked before round returns.
func (s *Scheduler) round(ctx context.Context) (roundStats, error) {
	s.observeLag(ctx)
	var (
		claimed = make(chan []store.ResendItem, s.cfg.Concurrency)
		acked   = make(chan []uuid.UUID, s.cfg.Concurrency)
		mu      sync.Mutex
		total   roundStats
		errs    []error
	)
	report := func(st roundStats, err error) {
		mu.Lock()
		defer mu.Unlock()
		total.add(st)
		if err != nil {
			errs = append(errs, err)
		}
	}

	var senders, marker sync.WaitGroup
	marker.Go(func() { s.markLoop(acked, report) })
	for range s.cfg.Concurrency {
		senders.Go(func() {
			for items := range claimed {
				st, ids, err := s.sendBatch(ctx, items)
				report(st, err)
				if len(ids) > 0 {
					acked <- ids
				}
			}
		})
	}
	report(roundStats{}, s.claimLoop(ctx, claimed))
	close(claimed)
	senders.Wait()
	close(acked)
	marker.Wait()
	return total, errors.Join(errs...)
}

// claimLoop claims batches in due order and hands them to the senders until a claim is not
// full, fails, or ctx ends.
func (s *Scheduler) claimLoop(ctx context.Context, out chan<- []store.ResendItem) error {
	var cursor store.DueCursor
	for ctx.Err() == nil {
		// A claim that ctx interrupted could have committed unseen, leaving its rows leased
		// until the lease expires: once started, a claim completes (bounded by markTimeout).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
		now := s.cfg.Now()
		start := time.Now()
		items, err := s.store.ClaimDueResendsAfter(cctx, s.cfg.InstanceID, now, cursor, s.cfg.BatchSize, now.Add(s.cfg.Lease))
		s.metrics.claim.Observe(time.Since(start).Seconds())
		cancel()
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return nil
		}
		cursor = cursor.After(items)
		// The rows are leased to this instance now: they are sent even when ctx ends.
		out <- items
		if len(items) < s.cfg.BatchSize {
			return nil
		}
	}
	return nil
}

// sendBatch moves the claimed items whose retries are exhausted to PERMANENT, sends the others,
// and records the sends that were not acknowledged. It returns the ids of the acknowledged
// records, which the marker marks RESENT.
func (s *Scheduler) sendBatch(ctx context.Context, items []store.ResendItem) (st roundStats, acked []uuid.UUID, err error) {
	st.claimed = len(items)
	// The rows are leased to this instance: finish the batch even when ctx ends.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.batchTimeout())
	defer cancel()

	send := items[:0:0]
	var exhausted []uuid.UUID
	for _, it := range items {
		if s.cfg.Backoff.Exhausted(it.Attempt) {
			exhausted = append(exhausted, it.ID)
		} else {
			send = append(send, it)
		}
	}
	var errs []error
	if len(exhausted) > 0 {
		moved, err := s.store.ExhaustRetries(bctx, s.cfg.InstanceID, exhausted, ReasonRetriesExhausted, s.cfg.Now())
		if err != nil {
			errs = append(errs, err)
		}
		st.exhausted = len(moved)
		s.metrics.resends.WithLabelValues(TriggerAuto, string(OutcomeExhausted)).Add(float64(len(moved)))
		if len(moved) > 0 {
			s.cfg.Logger.Info("retries exhausted: failures moved to PERMANENT", "count", len(moved), "max_attempts", s.cfg.Backoff.MaxAttempts)
		}
	}
	if len(send) == 0 {
		return st, nil, errors.Join(errs...)
	}

	start := time.Now()
	sendErrs := s.pub.send(send)
	s.metrics.send.Observe(time.Since(start).Seconds())
	now := s.cfg.Now()
	var failures []store.ResendFailure
	for i := range send {
		if sendErrs[i] == nil {
			acked = append(acked, send[i].ID)
			continue
		}
		failures = append(failures, store.ResendFailure{
			ID:            send[i].ID,
			Error:         sendErrs[i].Error(),
			NextAttemptAt: retryAt(s.cfg.SendBackoff, send[i].ResendFailures, now),
		})
	}
	s.metrics.acked.WithLabelValues(TriggerAuto).Add(float64(len(acked)))
	if len(failures) > 0 {
		st.failed += len(failures)
		s.metrics.resends.WithLabelValues(TriggerAuto, string(OutcomeFailed)).Add(float64(len(failures)))
		markStart := time.Now()
		if _, err := s.store.RecordResendFailures(bctx, s.cfg.InstanceID, now, failures); err != nil {
			// The leases stay until they expire; the rows are then due again.
			errs = append(errs, err)
		}
		s.metrics.mark.Observe(time.Since(markStart).Seconds())
		s.cfg.Logger.Warn("resends not acknowledged: failures stay due", "count", len(failures),
			"first_error", failures[0].Error)
	}
	return st, acked, errors.Join(errs...)
}

// markLoop marks the acknowledged batches RESENT until in is closed, combining the batches
// waiting at the time of a mark (up to markMaxBatches) into one statement.
func (s *Scheduler) markLoop(in <-chan []uuid.UUID, report func(roundStats, error)) {
	for ids := range in {
		batches := 1
	drain:
		for batches < markMaxBatches {
			select {
			case more, ok := <-in:
				if !ok {
					break drain
				}
				ids = append(ids, more...)
				batches++
			default:
				break drain
			}
		}
		report(s.mark(ids))
	}
}

// mark marks acknowledged rows RESENT. A row that could not be marked (its lease was taken
// over, its state changed meanwhile, or the database failed) counts as a failed resend: the
// record was republished, and it may be republished again once its lease expires.
func (s *Scheduler) mark(ids []uuid.UUID) (st roundStats, err error) {
	// It runs after the context of Run ended too: the rows are leased to this instance.
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	start := time.Now()
	marked, err := s.store.MarkResent(ctx, s.cfg.InstanceID, ids, s.cfg.Now(), nil)
	s.metrics.mark.Observe(time.Since(start).Seconds())
	if err != nil {
		s.cfg.Logger.Error("republished records could not be marked RESENT: they may be resent again when their leases expire",
			"count", len(ids), "error", err)
		marked = nil
	} else if n := len(ids) - len(marked); n > 0 {
		s.cfg.Logger.Warn("resent records whose failures changed meanwhile were not marked RESENT", "count", n)
	}
	st.resent, st.failed = len(marked), len(ids)-len(marked)
	s.metrics.resends.WithLabelValues(TriggerAuto, string(OutcomeResent)).Add(float64(st.resent))
	s.metrics.resends.WithLabelValues(TriggerAuto, string(OutcomeFailed)).Add(float64(st.failed))
	return st, err
}
