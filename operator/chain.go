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

// chainPlan is what an action on one failure of an ordering chain sends after it.
type chainPlan = resendtype.ChainPlan

// planChain returns what follows an action on the failure with id, read before the action
// (resendtype.PlanChain). A failure that does not exist plans nothing (the action reports it).
func (c *Core) planChain(ctx context.Context, id uuid.UUID, release bool) (chainPlan, error) {
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	ch, err := c.store.ParkedChain(qctx, id)
	if errors.Is(err, redrive.ErrNotFound) {
		return chainPlan{}, nil
	}
	if err != nil {
		return chainPlan{}, fmt.Errorf("ordering chain: %w", err)
	}
	return resendtype.PlanChain(ch, id, release), nil
}

// resendParked resends the failures p.Follow, one at a time in offset order, after the
// action on the chain's first failure succeeded. Each waits for the broker's acknowledgement
// of the one before, so that they reach the partition in order; with p.Release each carries
// avro.HeaderRelease = the head's causing message, which resolves the head at the
// consumer's ordering guard. The first that is not resent stops the rest (they keep their
// state and are reported failed): sending them on would break the order.
func (c *Core) resendParked(ctx context.Context, p chainPlan, principal, reason string) []ItemOutcome {
	if len(p.Follow) == 0 {
		return nil
	}
	req := resendtype.ManualRequest{Principal: principal, Reason: reason,
		Details: map[string]any{"ordering_chain": true, "release": p.Release != ""}, Headers: p.FollowHeaders()}
	out := make([]ItemOutcome, 0, len(p.Follow))
	for i, l := range p.Follow {
		res, err := c.cfg.Resender.ResendIDs(ctx, []uuid.UUID{l.ID}, req)
		if err == nil && len(res.Items) != 1 {
			err = fmt.Errorf("resend of one id answered %d outcomes", len(res.Items))
		}
		if err != nil {
			c.log.Error("operator: resending a parked failure failed", "id", l.ID, "error", err)
			for _, rest := range p.Follow[i:] {
				out = append(out, ItemOutcome{ID: rest.ID, Outcome: redrive.OutcomeFailed, Before: rest.State, After: rest.State,
					Detail: "not resent: internal error; the server log has the details"})
			}
			return out
		}
		o := resendOutcome(res.Items[0])
		out = append(out, o)
		if o.Outcome != redrive.OutcomeResent {
			for _, rest := range p.Follow[i+1:] {
				out = append(out, ItemOutcome{ID: rest.ID, Outcome: redrive.OutcomeFailed, Before: rest.State, After: rest.State,
					Detail: "not resent: the parked failure before it was not resent, and order must be kept"})
			}
			return out
		}
	}
	return out
}
