package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/redrive/redrive/resend"
)

// NewResender adapts the resend package's manual resender to the Resender the API uses:
//
//	cfg.Resender = api.NewResender(scheduler.Resender())
//
// It splits a request into calls of at most r.MaxIDs() ids, and reports a resender that was
// shut down as ErrResendUnavailable.
func NewResender(r *resend.Resender) Resender { return resendAdapter{r: r} }

type resendAdapter struct {
	r *resend.Resender
}

// Resend implements Resender.
func (a resendAdapter) Resend(ctx context.Context, ids []uuid.UUID, principal, reason string) ([]ItemOutcome, error) {
	ids = distinct(ids)
	chunk := max(1, a.r.MaxIDs())
	out := make([]ItemOutcome, 0, len(ids))
	for start := 0; start < len(ids); start += chunk {
		res, err := a.r.ResendIDs(ctx, ids[start:min(start+chunk, len(ids))], resend.ManualRequest{Principal: principal, Reason: reason})
		if errors.Is(err, resend.ErrClosed) {
			err = fmt.Errorf("%w: %w", ErrResendUnavailable, err)
		} else if err != nil {
			err = fmt.Errorf("resend: %w", err)
		}
		if err != nil {
			if start == 0 {
				return nil, err
			}
			// Earlier chunks were resent: report them, and the rest as failed.
			for _, id := range ids[start:] {
				out = append(out, ItemOutcome{ID: id, Outcome: OutcomeFailed, Detail: err.Error()})
			}
			return out, nil
		}
		for _, it := range res.Items {
			o := ItemOutcome{ID: it.ID, State: it.State, Detail: it.Error}
			switch it.Outcome {
			case resend.OutcomeResent:
				o.Outcome = OutcomeResent
			case resend.OutcomeNotFound:
				o.Outcome = OutcomeNotFound
			case resend.OutcomeConflict:
				o.Outcome = OutcomeConflict
			default:
				o.Outcome = OutcomeFailed
			}
			out = append(out, o)
		}
	}
	return out, nil
}
