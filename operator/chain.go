package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/resend/resendtype"
)

// ParkedChain returns the ordering-guard chain of the failure with id (redrive.ParkedChain): for
// a head, the failures parked behind it in offset order; for a parked failure, its head. It
// wraps redrive.ErrNotFound when no failure has the id.
func (c *Core) ParkedChain(ctx context.Context, id uuid.UUID) (redrive.ParkedChain, error) {
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	ch, err := c.store.ParkedChain(qctx, id)
	if err != nil {
		return redrive.ParkedChain{}, fromStore(err)
	}
	return ch, nil
}

// ownHeaders returns the headers of the resend of the one failure with id: the release, when
// it is parked behind a CLOSED head (resendtype.PlanChain), read before the resend. A failure
// that does not exist adds nothing (the action reports it).
func (c *Core) ownHeaders(ctx context.Context, id uuid.UUID) (resendtype.ChainPlan, error) {
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	ch, err := c.store.ParkedChain(qctx, id)
	if errors.Is(err, redrive.ErrNotFound) {
		return resendtype.ChainPlan{}, nil
	}
	if err != nil {
		return resendtype.ChainPlan{}, fmt.Errorf("ordering chain: %w", err)
	}
	return resendtype.PlanChain(ch, id, false), nil
}

// deferredFollowers returns those of ids that a retry of ids releases after their head
// (store.ParkedAmong) instead of resending them alongside it.
func (c *Core) deferredFollowers(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	d, err := c.store.ParkedAmong(qctx, ids)
	if err != nil {
		return nil, fmt.Errorf("ordering chains: %w", err)
	}
	return d, nil
}

// followChains has the resender release the ordering chains of the failures of items that
// the action succeeded on (Resender.FollowChains): after a resend (or a close with release)
// of a head, the open failures parked behind it, one at a time in offset order. It returns
// their outcomes in that order; a failure it cannot ask about is logged (its followers keep
// their state).
func (c *Core) followChains(ctx context.Context, act Action, release bool, items []ItemOutcome, principal, reason string, details map[string]any) []ItemOutcome {
	var heads []uuid.UUID
	for _, it := range items {
		if it.Outcome == act.Success() {
			heads = append(heads, it.ID)
		}
	}
	if len(heads) == 0 {
		return nil
	}
	followed, err := c.cfg.Resender.FollowChains(ctx, resendtype.ChainRequest{Heads: heads, Release: release,
		Request: resendtype.ManualRequest{Principal: principal, Reason: reason, Details: details}})
	if err != nil {
		c.log.Error("operator: the ordering chains of the failures acted on were not released; their parked failures keep their state",
			"action", act, "heads", len(heads), "error", err)
		return nil
	}
	var out []ItemOutcome
	for _, f := range followed {
		for _, it := range f.Items {
			out = append(out, resendOutcome(it))
		}
	}
	return out
}

// mergeFollowers puts the outcomes of followers that were in the action's selection (deferred)
// in items at their place in ids, and returns the other followers' outcomes. A deferred
// failure that no release reached (its head was not resent) is failed, not attempted.
func mergeFollowers(ids []uuid.UUID, items, followers []ItemOutcome, deferred map[uuid.UUID]bool) (merged, others []ItemOutcome) {
	if len(deferred) == 0 {
		return items, followers
	}
	by := make(map[uuid.UUID]ItemOutcome, len(items)+len(deferred))
	for _, it := range items {
		by[it.ID] = it
	}
	for _, f := range followers {
		if deferred[f.ID] {
			by[f.ID] = f
		} else {
			others = append(others, f)
		}
	}
	merged = make([]ItemOutcome, 0, len(ids))
	for _, id := range ids {
		it, ok := by[id]
		if !ok {
			it = ItemOutcome{ID: id, Outcome: OutcomeFailed,
				Detail: "not attempted: it is parked behind a failure of the selection that was not resent, and order must be kept"}
		}
		merged = append(merged, it)
	}
	return merged, others
}
