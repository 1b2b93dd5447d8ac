package resend

import (
	"context"

	"github.com/google/uuid"

	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// followChains resends, after the heads of ordering-guard chains among acked (ids the broker
// acknowledged, in send order), the open failures parked behind each head, as an operator's
// retry of the head does (resendtype.PlanChain): one at a time in offset order, each after the
// broker acknowledged the one before, with an audit entry each (trigger "auto"). The first
// follower that is not resent stops the rest of its chain: they keep their state, and
// sending them on would break the key's order. Only the ids that store.WithParkedFollowers
// finds, in one query, have their chain read. It returns how many followers were resent and
// how many were not.
func (s *Scheduler) followChains(ctx context.Context, acked []uuid.UUID) (resent, failed int) {
	if len(acked) == 0 {
		return 0, 0
	}
	heads, err := s.store.WithParkedFollowers(ctx, acked)
	if err != nil {
		s.cfg.Logger.Error("ordering chains of resent failures unknown: their parked failures wait for an operator", "error", err)
		return 0, 0
	}
	for _, id := range heads {
		ch, err := s.store.ParkedChain(ctx, id)
		if err != nil {
			s.cfg.Logger.Error("ordering chain of a resent failure unknown: its parked failures wait for an operator", "id", id, "error", err)
			continue
		}
		plan := resendtype.PlanChain(ch, id, false)
		r, f := s.resender.resendFollowers(ctx, id, plan)
		resent, failed = resent+r, failed+f
	}
	return resent, failed
}

// resendFollowers resends plan.Follow after the resend of head, one at a time, and stops at
// the first that is not resent.
func (r *Resender) resendFollowers(ctx context.Context, head uuid.UUID, plan resendtype.ChainPlan) (resent, failed int) {
	req := ManualRequest{Principal: r.s.cfg.ServiceName, Headers: plan.FollowHeaders(),
		Details: map[string]any{"ordering_chain": true, "head": head.String(), "release": plan.Release != ""}}
	var edit func(*store.ResendItem)
	if hs := plan.FollowHeaders(); len(hs) > 0 {
		edit = func(it *store.ResendItem) { it.Headers = append(it.Headers[:len(it.Headers):len(it.Headers)], hs...) }
	}
	for i, l := range plan.Follow {
		part := []ItemResult{{ID: l.ID}}
		r.resendChunk(ctx, part, req, edit, TriggerAuto)
		r.s.metrics.resends.WithLabelValues(TriggerAuto, string(part[0].Outcome)).Inc()
		if part[0].Outcome != OutcomeResent {
			r.s.cfg.Logger.Warn("a failure parked behind a resent head was not resent: it and those after it wait for an operator",
				"head", head, "id", l.ID, "outcome", part[0].Outcome, "error", part[0].Error, "left", len(plan.Follow)-i-1)
			return resent, len(plan.Follow) - i
		}
		resent++
	}
	return resent, 0
}
