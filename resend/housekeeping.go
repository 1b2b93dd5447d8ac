package resend

import (
	"context"
	"time"

	"github.com/redrive/redrive/store"
)

// HousekeepingResult counts what one housekeeping run deleted.
type HousekeepingResult struct {
	// Failures counts the deleted failures by state.
	Failures map[store.State]int64
	// Groups counts the groups deleted because they were left empty.
	Groups int64
}

// housekeep deletes RESENT and CLOSED failures older than Housekeeping.ResolvedAge and
// PERMANENT ones older than Housekeeping.PermanentAge, in batches of Housekeeping.BatchSize,
// and the groups this leaves empty. RETRY_PENDING failures are never deleted. Instances share
// the work: rows another instance is deleting are skipped.
func (s *Scheduler) housekeep(ctx context.Context) (HousekeepingResult, error) {
	h := s.cfg.Housekeeping
	now := s.cfg.Now()
	res := HousekeepingResult{Failures: make(map[store.State]int64)}
	jobs := []struct {
		state store.State
		age   time.Duration
	}{
		{store.StateResent, h.ResolvedAge},
		{store.StateClosed, h.ResolvedAge},
		{store.StatePermanent, h.PermanentAge},
	}
	for _, job := range jobs {
		cutoff := now.Add(-job.age)
		for ctx.Err() == nil {
			n, groups, err := s.store.DeleteExpired(ctx, job.state, cutoff, h.BatchSize)
			res.Failures[job.state] += n
			res.Groups += groups
			s.metrics.deleted.WithLabelValues(string(job.state)).Add(float64(n))
			s.metrics.deletedGroups.Add(float64(groups))
			if err != nil {
				return res, err
			}
			if n < int64(h.BatchSize) {
				break
			}
		}
	}
	if total := res.Failures[store.StateResent] + res.Failures[store.StateClosed] + res.Failures[store.StatePermanent]; total > 0 || res.Groups > 0 {
		s.cfg.Logger.Info("housekeeping deleted old failures",
			"resent", res.Failures[store.StateResent], "closed", res.Failures[store.StateClosed],
			"permanent", res.Failures[store.StatePermanent], "groups", res.Groups)
	}
	return res, ctx.Err()
}
