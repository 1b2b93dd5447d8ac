package resend

import (
	"context"
	"errors"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/store"
)

// Defaults of HousekeepingConfig's partition maintenance.
const (
	DefaultPartitionWidth  = 7 * 24 * time.Hour
	DefaultPartitionsAhead = 28 * 24 * time.Hour
	DefaultMaxCarry        = 10000
)

// HousekeepingResult counts what one housekeeping run did.
type HousekeepingResult struct {
	// Failures counts the failures deleted row by row from the default partition, by state.
	Failures map[redrive.State]int64
	// Groups counts the groups deleted because they were left empty.
	Groups int64
	// Created are the partitions created ahead.
	Created []store.Partition
	// Dropped are the expired partitions dropped, each with the failures it dropped and
	// carried forward.
	Dropped []store.DroppedPartition
	// Texts counts the stack traces deleted because no stored failure references them.
	Texts int64
}

// housekeep maintains the partitions of the failure tables and applies retention:
//
//  1. it creates the partitions up to PartitionsAhead past now;
//  2. it drops the partitions whose range is older than the shorter of ResolvedAge and
//     PermanentAge, after moving their failures that have not expired into the default
//     partition (store.DropExpiredPartitions: nothing open is lost);
//  3. it deletes the expired failures of the default partition in batches of BatchSize:
//     RESENT and CLOSED failures older than ResolvedAge, PERMANENT ones older than
//     PermanentAge (RETRY_PENDING failures are never deleted), and the groups left empty;
//  4. it deletes the stack traces that no stored failure can reference.
//
// Instances share the work: rows another instance is deleting are skipped, and a partition
// another instance holds is left for the next run.
func (s *Scheduler) housekeep(ctx context.Context) (HousekeepingResult, error) {
	h := s.cfg.Housekeeping
	if h.PartitionWidth == 0 {
		h.PartitionWidth = DefaultPartitionWidth
	}
	if h.PartitionsAhead == 0 {
		h.PartitionsAhead = DefaultPartitionsAhead
	}
	switch {
	case h.MaxCarry == 0:
		h.MaxCarry = DefaultMaxCarry
	case h.MaxCarry < 0:
		h.MaxCarry = 0 // no limit
	}
	now := s.cfg.Now()
	res := HousekeepingResult{Failures: make(map[redrive.State]int64)}
	var errs []error

	ensured, err := s.store.EnsurePartitions(ctx, store.EnsurePartitionsParams{Now: now, Width: h.PartitionWidth, Ahead: h.PartitionsAhead})
	res.Created = ensured.Created
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range ensured.Skipped {
		s.cfg.Logger.Warn("partition not created: rows of its range are in the default partition", "partition", p.Name,
			"from", p.From, "to", p.To)
	}

	dropped, err := s.store.DropExpiredPartitions(ctx, store.RetentionParams{Now: now, ResolvedAge: h.ResolvedAge,
		PermanentAge: h.PermanentAge, MaxCarry: h.MaxCarry})
	res.Dropped = dropped
	for _, d := range dropped {
		res.Groups += d.Groups
		s.metrics.deletedGroups.Add(float64(d.Groups))
		s.metrics.deleted.WithLabelValues("partition").Add(float64(d.Dropped))
		s.cfg.Logger.Info("housekeeping dropped an expired partition", "partition", d.Name, "from", d.From, "to", d.To,
			"dropped", d.Dropped, "carried", d.Carried, "groups", d.Groups, "locked", d.Locked)
	}
	if err != nil {
		errs = append(errs, err)
	}
	// The links of the ordering chains' parked failures that went with the dropped periods.
	if len(dropped) > 0 {
		before := dropped[0].To
		for _, d := range dropped {
			before = later(before, d.To)
		}
		if _, err := s.store.DeleteOrphanLinks(ctx, before); err != nil {
			errs = append(errs, err)
		}
	}

	jobs := []struct {
		state redrive.State
		age   time.Duration
	}{
		{redrive.StateResent, h.ResolvedAge},
		{redrive.StateClosed, h.ResolvedAge},
		{redrive.StatePermanent, h.PermanentAge},
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
				return res, errors.Join(append(errs, err)...)
			}
			if n < int64(h.BatchSize) {
				break
			}
		}
	}
	if total := res.Failures[redrive.StateResent] + res.Failures[redrive.StateClosed] + res.Failures[redrive.StatePermanent]; total > 0 || res.Groups > 0 {
		s.cfg.Logger.Info("housekeeping deleted old failures",
			"resent", res.Failures[redrive.StateResent], "closed", res.Failures[redrive.StateClosed],
			"permanent", res.Failures[redrive.StatePermanent], "groups", res.Groups)
	}

	texts, err := s.store.DeleteUnusedTexts(ctx, now.Add(-max(h.ResolvedAge, h.PermanentAge)))
	res.Texts = texts
	if err != nil {
		errs = append(errs, err)
	}
	if h.AuditAge > 0 {
		logs, err := s.store.DropExpiredLogPartitions(ctx, store.LogRetentionParams{Now: now, Age: h.AuditAge, Limit: h.BatchSize})
		for _, d := range logs.Periods {
			if d.Waiting {
				s.cfg.Logger.Warn("audit and job item partition kept: a job created in it is not finished", "partition", d.Name)
				continue
			}
			s.cfg.Logger.Info("housekeeping dropped an expired audit and job item partition", "partition", d.Name,
				"entries", d.Entries, "items", d.Items, "jobs", d.Jobs)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return res, errors.Join(errs...)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
