package operator

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// ParkedChain returns the ordering-guard chain of the failure with id (store.ParkedChain): for
// a head, the failures parked behind it in offset order; for a parked failure, its head. It
// wraps ErrNotFound when no failure has the id.
func (c *Core) ParkedChain(ctx context.Context, id uuid.UUID) (store.ParkedChain, error) {
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	ch, err := c.store.ParkedChain(qctx, id)
	if err != nil {
		return store.ParkedChain{}, fromStore(err)
	}
	return ch, nil
}

// resendParked resends the open failures parked behind the head with id, one at a time in
// their original offset order, after the head was resent or closed. Each waits for the
// broker's acknowledgement of the one before, so that they reach the head's partition in
// order behind it. With release, each carries avro.HeaderRelease = the head's causing
// message, which resolves the head at the consumer's ordering guard. The first that is not
// resent stops the rest (they keep their state and are reported failed): sending them on
// would break the order.
func (c *Core) resendParked(ctx context.Context, head uuid.UUID, principal, reason string, release bool) ([]ItemOutcome, error) {
	qctx, cancel := c.queryContext(ctx)
	ch, err := c.store.ParkedChain(qctx, head)
	cancel()
	if err != nil {
		return nil, fromStore(err)
	}
	if ch.Head == nil || ch.Head.ID != head {
		return nil, nil // not the head of a chain (or no longer its latest failure)
	}
	req := resendtype.ManualRequest{Principal: principal, Reason: reason,
		Details: map[string]any{"parked_behind": head.String(), "release": release}}
	if release {
		req.Headers = []avro.Header{{Name: avro.HeaderRelease, Value: []byte(ch.Head.CausingMessage)}}
	}
	open := ch.Open()
	out := make([]ItemOutcome, 0, len(open))
	for i, l := range open {
		res, err := c.cfg.Resender.ResendIDs(ctx, []uuid.UUID{l.ID}, req)
		if err == nil && len(res.Items) != 1 {
			err = fmt.Errorf("resend of one id answered %d outcomes", len(res.Items))
		}
		if err != nil {
			c.log.Error("operator: resending a parked failure failed", "head", head, "id", l.ID, "error", err)
			for _, rest := range open[i:] {
				out = append(out, ItemOutcome{ID: rest.ID, Outcome: OutcomeFailed, Before: rest.State, After: rest.State,
					Detail: "not resent: internal error; the server log has the details"})
			}
			return out, nil
		}
		o := resendOutcome(res.Items[0])
		out = append(out, o)
		if o.Outcome != OutcomeResent {
			for _, rest := range open[i+1:] {
				out = append(out, ItemOutcome{ID: rest.ID, Outcome: OutcomeFailed, Before: rest.State, After: rest.State,
					Detail: "not resent: the parked failure before it was not resent, and order must be kept"})
			}
			return out, nil
		}
	}
	return out, nil
}
