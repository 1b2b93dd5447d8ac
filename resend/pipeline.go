package resend

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/store"
)

// markMaxBatches bounds one RESENT mark: it combines the ids of at most this many acknowledged
// batches into one UPDATE.
const markMaxBatches = 4

// markBacklog is how many acknowledged batches the marker lets wait before it marks them, while
// the round is still sending. Marks are the most expensive statements of a resend (a RESENT row
// is a new row version with an entry in every index): deferring them while the claims, loads and
// sends run gets the records to the broker sooner, and the marks then run on markParallel
// connections at once. The cost is the window of records that are acknowledged and not yet
// marked, which a crash of this instance lets another one resend (at-least-once).
const markBacklog = 32

// markParallel is how many mark statements run at once.
const markParallel = 2

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
//   - one claimer claims Concurrency batches at a time in due order, each claim starting
//     after the last row of the one before (store.DueClaim.Next), until a claim is not full; a
//     claim reads only the due index and writes one row per batch;
//   - Concurrency senders each load the records of one batch, produce them and wait for the
//     acknowledgements; a batch that is acknowledged goes to the marker, and the sender takes
//     the next batch at once;
//   - the marker marks the acknowledged rows RESENT and releases their claims. It lets up to
//     markBacklog batches wait; when the backlog is full, or the senders are done, it marks
//     them, combining up to markMaxBatches batches into one statement and running up to
//     markParallel statements at once.
//
// The rows stay claimed by this instance from the claim until the mark, so no other instance
// sends them meanwhile. The queues between the stages are bounded, so when the database falls
// behind the claims wait, and at most markBacklog + Concurrency batches are acknowledged and
// not yet marked (records that a crash would let another instance resend).
// When ctx ends the claimer stops; the batches already claimed are sent and every acknowledged
// row is marked before round returns.
func (s *Scheduler) round(ctx context.Context) (roundStats, error) {
	s.observeLag(ctx)
	var (
		claimed = make(chan store.DueClaim, s.cfg.Concurrency)
		acked   = make(chan settled, s.cfg.Concurrency)
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
			for claim := range claimed {
				st, ids, created, err := s.sendBatch(ctx, claim)
				report(st, err)
				acked <- settled{claim: claim.ID, acked: ids, createdAt: created}
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

// claimLoop claims batches in due order, Concurrency batches per claim transaction, and hands
// them to the senders until a claim is not full, fails, or ctx ends.
func (s *Scheduler) claimLoop(ctx context.Context, out chan<- store.DueClaim) error {
	var cursor store.DueCursor
	for ctx.Err() == nil {
		// A claim that ctx interrupted could have committed unseen, leaving its rows claimed
		// until the claim expires: once started, a claim completes (bounded by markTimeout).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
		now := s.cfg.Now()
		start := time.Now()
		claims, err := s.store.ClaimDueBatches(cctx, store.ClaimDueParams{
			Owner: s.cfg.InstanceID, Now: now, After: cursor, BatchSize: s.cfg.BatchSize, Batches: s.cfg.Concurrency,
			LeaseUntil: now.Add(s.cfg.Lease),
		})
		s.metrics.claim.Observe(time.Since(start).Seconds())
		cancel()
		if err != nil {
			return err
		}
		n := 0
		for _, c := range claims {
			n += len(c.IDs)
			cursor = c.Next
			// The rows are claimed by this instance now: they are sent even when ctx ends.
			out <- c
		}
		if n < s.cfg.BatchSize*s.cfg.Concurrency {
			return nil
		}
	}
	return nil
}

// sendBatch loads the records of a claimed batch, moves the failures whose retries are
// exhausted to PERMANENT, sends the others, and records the sends that were not acknowledged.
// The acknowledged records that head an ordering guard's chain are followed by the failures
// parked behind them (followChains), which count in st. It returns the ids of the acknowledged
// records and their created_at, which the marker marks RESENT. Every lookup carries the claimed
// created_at: it reads one partition, not every one.
func (s *Scheduler) sendBatch(ctx context.Context, claim store.DueClaim) (st roundStats, acked []uuid.UUID, ackedAt []time.Time, err error) {
	st.claimed = len(claim.IDs)
	// The rows are claimed by this instance: finish the batch even when ctx ends.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.batchTimeout())
	defer cancel()

	start := time.Now()
	items, err := s.store.ResendItemsAt(bctx, claim.IDs, claim.CreatedAt)
	s.metrics.load.Observe(time.Since(start).Seconds())
	if err != nil {
		// Nothing was sent; the marker releases the claim, and the next round claims them again.
		return st, nil, nil, err
	}
	if n := len(claim.IDs) - len(items); n > 0 {
		// Only an operator's database edit does this: actions wait for the claim to end.
		s.cfg.Logger.Warn("claimed failures left RETRY_PENDING before they were sent: not resent", "count", n)
	}

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
		moved, err := s.store.ExhaustRetries(bctx, exhausted, ReasonRetriesExhausted, s.cfg.Now())
		if err != nil {
			errs = append(errs, err)
		}
		st.exhausted = len(moved)
		s.metrics.resends.WithLabelValues(TriggerAuto, string(redrive.OutcomeExhausted)).Add(float64(len(moved)))
		if len(moved) > 0 {
			s.cfg.Logger.Info("retries exhausted: failures moved to PERMANENT", "count", len(moved), "max_attempts", s.cfg.Backoff.MaxAttempts)
		}
	}
	if len(send) == 0 {
		return st, nil, nil, errors.Join(errs...)
	}

	start = time.Now()
	sendErrs := s.pub.send(rootContext(ctx), send)
	s.metrics.send.Observe(time.Since(start).Seconds())
	now := s.cfg.Now()
	var (
		failures []store.ResendFailure
		causing  []string
	)
	for i := range send {
		if sendErrs[i] == nil {
			acked, ackedAt = append(acked, send[i].ID), append(ackedAt, send[i].CreatedAt)
			causing = append(causing, send[i].CausingMessage)
			continue
		}
		failures = append(failures, store.ResendFailure{
			ID:            send[i].ID,
			CreatedAt:     send[i].CreatedAt,
			Error:         sendErrs[i].Error(),
			NextAttemptAt: retryAt(s.cfg.SendBackoff, send[i].ResendFailures, now),
		})
	}
	s.metrics.acked.WithLabelValues(TriggerAuto).Add(float64(len(acked)))
	if len(failures) > 0 {
		st.failed += len(failures)
		s.metrics.resends.WithLabelValues(TriggerAuto, string(redrive.OutcomeFailed)).Add(float64(len(failures)))
		markStart := time.Now()
		if _, err := s.store.RecordResendFailures(bctx, now, failures); err != nil {
			// The claim is released with the mark; the rows are due again at their new time.
			errs = append(errs, err)
		}
		s.metrics.mark.Observe(time.Since(markStart).Seconds())
		s.cfg.Logger.Warn("resends not acknowledged: failures stay due", "count", len(failures),
			"first_error", failures[0].Error)
	}
	// The heads of ordering chains among the acknowledged: the failures parked behind them follow.
	r, f := s.followChains(bctx, acked, ackedAt, causing)
	st.resent, st.failed = st.resent+r, st.failed+f
	return st, acked, ackedAt, errors.Join(errs...)
}

// settled is a batch whose records were sent: the claim that held it and the ids of the
// records the broker acknowledged, with their created_at.
type settled struct {
	claim     int64
	acked     []uuid.UUID
	createdAt []time.Time
}

// markLoop marks the acknowledged records RESENT and releases their claims until in is closed.
// It lets up to markBacklog batches wait, and marks them when the backlog is full or in is
// closed (the round has sent everything it claimed).
func (s *Scheduler) markLoop(in <-chan settled, report func(roundStats, error)) {
	var waiting []settled
	for b := range in {
		if waiting = append(waiting, b); len(waiting) >= markBacklog {
			s.markAll(waiting, report)
			waiting = waiting[:0]
		}
	}
	s.markAll(waiting, report)
}

// markAll marks batches, up to markMaxBatches per statement and markParallel statements at once.
func (s *Scheduler) markAll(batches []settled, report func(roundStats, error)) {
	sem := make(chan struct{}, markParallel)
	var wg sync.WaitGroup
	for len(batches) > 0 {
		n := min(len(batches), markMaxBatches)
		var (
			claims  []int64
			ids     []uuid.UUID
			created []time.Time
		)
		for _, b := range batches[:n] {
			claims, ids, created = append(claims, b.claim), append(ids, b.acked...), append(created, b.createdAt...)
		}
		batches = batches[n:]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			report(s.mark(claims, ids, created))
		})
	}
	wg.Wait()
}

// mark marks acknowledged records RESENT and releases the claims. A row that could not be
// marked (its state changed meanwhile, or the database failed) counts as a failed resend: the
// record was republished, and when the claim could not be released it is republished again
// once the claim expires. createdAt holds the created_at of each of ids.
func (s *Scheduler) mark(claims []int64, ids []uuid.UUID, createdAt []time.Time) (st roundStats, err error) {
	// It runs after the context of Run ended too: the rows are claimed by this instance.
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	start := time.Now()
	marked, err := s.store.MarkResent(ctx, store.MarkResentParams{Owner: s.cfg.InstanceID, Claims: claims, IDs: ids, CreatedAt: createdAt, At: s.cfg.Now()})
	s.metrics.mark.Observe(time.Since(start).Seconds())
	if err != nil {
		s.cfg.Logger.Error("republished records could not be marked RESENT: they may be resent again when their claims expire",
			"count", len(ids), "error", err)
		marked = nil
	} else if n := len(ids) - len(marked); n > 0 {
		s.cfg.Logger.Warn("resent records whose failures changed meanwhile were not marked RESENT", "count", n)
	}
	st.resent, st.failed = len(marked), len(ids)-len(marked)
	s.metrics.resends.WithLabelValues(TriggerAuto, string(redrive.OutcomeResent)).Add(float64(st.resent))
	s.metrics.resends.WithLabelValues(TriggerAuto, string(redrive.OutcomeFailed)).Add(float64(st.failed))
	return st, err
}
