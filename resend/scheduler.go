package resend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/redrive/redrive/store"
)

// markTimeout bounds the statements that record the outcome of a batch whose records were
// sent, which run even after the context of Run ended.
const markTimeout = 30 * time.Second

// Scheduler resends due RETRY_PENDING failures without a leader: every instance claims due
// rows in batches (one claim with an expiry per batch, taken one at a time), produces them, waits
// for the acknowledgements and marks them RESENT. It also runs housekeeping and owns the producer
// that its Resender (manual resends) shares.
type Scheduler struct {
	cfg      Config
	store    *store.Store
	pub      *router
	metrics  *metrics
	resender *Resender
	running  atomic.Bool
}

// New returns a Scheduler for cfg, with its producer created; call Run to start it.
func New(cfg Config) (*Scheduler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register resend metrics: %w", err)
	}
	cm, err := newClusterMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register resend metrics: %w", err)
	}
	pub, err := newRouter(cfg, cm)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, store: cfg.Store, pub: pub, metrics: m}
	stopCtx, stop := context.WithCancel(context.Background())
	s.resender = &Resender{
		s:       s,
		owner:   cfg.InstanceID + "/manual",
		limiter: rate.NewLimiter(rate.Limit(cfg.ManualRate), cfg.ManualBurst),
		stopCtx: stopCtx,
		stop:    stop,
	}
	return s, nil
}

// Resender returns the manual resender, which shares the scheduler's producer. It works from
// New until Run returns.
func (s *Scheduler) Resender() *Resender { return s.resender }

// ServiceName returns this service's name as written to the jeap_eh_error_handling_service
// header of resent records.
func (s *Scheduler) ServiceName() string { return s.cfg.ServiceName }

// InstanceID returns the name this instance claims failures under.
func (s *Scheduler) InstanceID() string { return s.cfg.InstanceID }

// Run runs scheduler rounds every Interval (unless DisableAutomatic) and housekeeping every
// Housekeeping.Interval (unless Housekeeping.Disable) until ctx ends. It then finishes the batches in flight (each bounded by SendTimeout), waits for the
// manual resends in flight, flushes and closes the producer, and returns nil. Run may be called
// once; afterwards the Resender fails with redrive.ErrClosed.
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("resend scheduler: Run called twice")
	}
	s.cfg.Logger.Info("resend scheduler started", "instance", s.cfg.InstanceID,
		"automatic", !s.cfg.DisableAutomatic, "interval", s.cfg.Interval, "batch_size", s.cfg.BatchSize,
		"concurrency", s.cfg.Concurrency, "housekeeping", !s.cfg.Housekeeping.Disable,
		"housekeeping_interval", s.cfg.Housekeeping.Interval)
	var wg sync.WaitGroup
	if !s.cfg.DisableAutomatic {
		wg.Go(func() {
			every(ctx, s.cfg.Interval, func() {
				if _, err := s.round(ctx); err != nil && ctx.Err() == nil {
					s.cfg.Logger.Error("resend round failed", "error", err)
				}
			})
		})
	}
	// Releases of ordering chains that an instance's end interrupted: on every instance, with
	// or without automatic resends.
	wg.Go(func() {
		every(ctx, s.cfg.Interval, func() {
			if _, err := s.resender.ResumeChainReleases(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Error("finishing interrupted chain releases failed", "error", err)
			}
		})
	})
	if !s.cfg.Housekeeping.Disable {
		wg.Go(func() {
			every(ctx, s.cfg.Housekeeping.Interval, func() {
				if _, err := s.housekeep(ctx); err != nil && ctx.Err() == nil {
					s.cfg.Logger.Error("housekeeping failed", "error", err)
				}
			})
		})
	}
	<-ctx.Done()
	wg.Wait()
	s.resender.shutdown()
	s.pub.close()
	s.cfg.Logger.Info("resend scheduler stopped", "instance", s.cfg.InstanceID)
	return nil
}

// every calls fn at once and then every interval until ctx ends; a slow fn delays the next call
// rather than stacking calls.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// delivered is the outcome of sending one claimed item.
type delivered struct {
	Item    *store.ResendItem
	Outcome Outcome // redrive.OutcomeResent or redrive.OutcomeFailed
	Err     string  // why it failed
}

// deliver sends the items of a manual resend's claim (or of an ordering chain's follower, which
// trigger says), records the failed sends (due again after
// SendBackoff when RETRY_PENDING), marks the acknowledged ones RESENT and releases the claim, with
// the audit entries that audit returns in the same transaction. It returns one outcome per item, in order. An acknowledged
// record whose row could not be marked is a failed outcome that says so.
func (s *Scheduler) deliver(ctx context.Context, owner, trigger string, claim store.ResendClaim, audit func([]delivered) []redrive.AuditEntry) ([]delivered, error) {
	items := claim.Items
	out := make([]delivered, len(items))
	if len(items) == 0 && audit == nil {
		return out, nil
	}
	start := time.Now()
	sendErrs := s.pub.send(ctx, items)
	if len(items) > 0 {
		s.metrics.send.Observe(time.Since(start).Seconds())
	}

	now := s.cfg.Now()
	markStart := time.Now()
	defer func() { s.metrics.mark.Observe(time.Since(markStart).Seconds()) }()
	var (
		acked    []uuid.UUID
		failures []store.ResendFailure
		errs     []error
	)
	for i := range items {
		it := &items[i]
		out[i].Item = it
		if sendErrs[i] == nil {
			acked = append(acked, it.ID)
			out[i].Outcome = redrive.OutcomeResent
			continue
		}
		out[i].Outcome, out[i].Err = redrive.OutcomeFailed, sendErrs[i].Error()
		failures = append(failures, store.ResendFailure{
			ID:            it.ID,
			Error:         sendErrs[i].Error(),
			NextAttemptAt: retryAt(s.cfg.SendBackoff, it.ResendFailures, now),
		})
	}
	s.metrics.acked.WithLabelValues(trigger).Add(float64(len(acked)))
	if len(failures) > 0 {
		if _, err := s.store.RecordResendFailures(ctx, now, failures); err != nil {
			// The rows are due again when the claim is released.
			errs = append(errs, err)
		}
		s.cfg.Logger.Warn("resends not acknowledged: failures stay due", "count", len(failures),
			"first_error", failures[0].Error)
	}

	var auditFn func([]uuid.UUID) []redrive.AuditEntry
	settle := func(marked []uuid.UUID) {
		ok := make(map[uuid.UUID]bool, len(marked))
		for _, id := range marked {
			ok[id] = true
		}
		for i := range out {
			if out[i].Outcome == redrive.OutcomeResent && !ok[out[i].Item.ID] {
				out[i].Outcome = redrive.OutcomeFailed
				out[i].Err = "republished, but the failure's state changed meanwhile: not marked RESENT"
			}
		}
	}
	if audit != nil {
		auditFn = func(marked []uuid.UUID) []redrive.AuditEntry {
			settle(marked)
			return audit(out)
		}
	}
	var claims []int64
	if claim.ID != 0 {
		claims = []int64{claim.ID}
	}
	marked, err := s.store.MarkResent(ctx, store.MarkResentParams{Owner: owner, Claims: claims, IDs: acked, At: now, Audit: auditFn})
	if err != nil {
		for i := range out {
			if out[i].Outcome == redrive.OutcomeResent {
				out[i].Outcome = redrive.OutcomeFailed
				out[i].Err = "republished, but marking it RESENT failed (database error): it may be resent again when its claim expires"
			}
		}
		return out, errors.Join(append(errs, err)...)
	}
	settle(marked)
	if n := len(acked) - len(marked); n > 0 {
		s.cfg.Logger.Warn("resent records whose failures changed meanwhile were not marked RESENT", "count", n)
	}
	return out, errors.Join(errs...)
}

// retryAt returns when a failure is due again after its nth unacknowledged resend (n counts
// the earlier ones, from 0). The send backoff never turns a failure PERMANENT.
func retryAt(b Backoff, n int, now time.Time) time.Time {
	if t, ok := b.Next(n, now); ok {
		return t
	}
	return now.Add(b.Delay(n))
}

// observeLag sets the scheduler lag gauge: now − the oldest due next_attempt_at.
func (s *Scheduler) observeLag(ctx context.Context) {
	now := s.cfg.Now()
	oldest, ok, err := s.store.OldestDue(ctx, now)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("resend scheduler lag unknown", "error", err)
		}
	case !ok:
		s.metrics.lag.Set(0)
	default:
		s.metrics.lag.Set(now.Sub(oldest).Seconds())
	}
}
