package resend

import (
	"context"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// followChains resends, after the heads of ordering-guard chains among acked (ids the broker
// acknowledged, in send order), the open failures parked behind each head, as an operator's
// retry of the head does (Resender.followChains), with audit entries of the trigger "auto". It
// returns how many followers were resent and how many were not.
func (s *Scheduler) followChains(ctx context.Context, acked []uuid.UUID) (resent, failed int) {
	return s.resender.followChains(ctx, acked, ManualRequest{Principal: s.cfg.ServiceName}, TriggerAuto)
}

// FollowChains resends, after the heads of ordering-guard chains among acked (failures whose
// resends the broker acknowledged, in send order), the open failures parked behind each head,
// as an operator's retry of the head does, with audit entries of req (trigger "manual"). A
// retry job calls it for the records of a batch it sent. It applies no rate limit. It returns
// how many followers were resent and how many were not; nothing once the Resender is shut down.
func (r *Resender) FollowChains(ctx context.Context, acked []uuid.UUID, req ManualRequest) (resent, failed int) {
	if !r.enter() {
		return 0, 0
	}
	defer r.inflight.Done()
	return r.followChains(ctx, acked, req, TriggerManual)
}

// followChains resends the open parked followers of the heads among acked
// (resendtype.PlanChain): one at a time in offset order, each after the broker acknowledged
// the one before, with an audit entry each (req's principal and details, plus
// "ordering_chain" and "head"). The first follower that is not resent stops the rest of its
// chain: they keep their state, and sending them on would break the key's order. Only the ids
// that store.WithParkedFollowers finds, in one query, have their chain read.
func (r *Resender) followChains(ctx context.Context, acked []uuid.UUID, req ManualRequest, trigger string) (resent, failed int) {
	if len(acked) == 0 {
		return 0, 0
	}
	log := r.s.cfg.Logger
	heads, err := r.s.store.WithParkedFollowers(ctx, acked)
	if err != nil {
		log.Error("ordering chains of resent failures unknown: their parked failures wait for an operator", "error", err)
		return 0, 0
	}
	for _, id := range heads {
		ch, err := r.s.store.ParkedChain(ctx, id)
		if err != nil {
			log.Error("ordering chain of a resent failure unknown: its parked failures wait for an operator", "id", id, "error", err)
			continue
		}
		n, f := r.resendFollowers(ctx, id, resendtype.PlanChain(ch, id, false), req, trigger)
		resent, failed = resent+n, failed+f
	}
	return resent, failed
}

// resendFollowers resends plan.Follow after the resend of head, one at a time, and stops at
// the first that is not resent.
func (r *Resender) resendFollowers(ctx context.Context, head uuid.UUID, plan resendtype.ChainPlan, req ManualRequest, trigger string) (resent, failed int) {
	details := map[string]any{}
	for k, v := range req.Details {
		details[k] = v
	}
	details["ordering_chain"], details["head"], details["release"] = true, head.String(), plan.Release != ""
	req.Details, req.Headers = details, plan.FollowHeaders()
	var edit func(*store.ResendItem)
	if hs := plan.FollowHeaders(); len(hs) > 0 {
		edit = func(it *store.ResendItem) { it.Headers = append(it.Headers[:len(it.Headers):len(it.Headers)], hs...) }
	}
	for i, l := range plan.Follow {
		part := []ItemResult{{ID: l.ID}}
		r.resendChunk(ctx, part, req, edit, trigger)
		r.s.metrics.resends.WithLabelValues(trigger, string(part[0].Outcome)).Inc()
		if part[0].Outcome != redrive.OutcomeResent {
			r.s.cfg.Logger.Warn("a failure parked behind a resent head was not resent: it and those after it wait for an operator",
				"head", head, "id", l.ID, "outcome", part[0].Outcome, "error", part[0].Error, "left", len(plan.Follow)-i-1)
			return resent, len(plan.Follow) - i
		}
		resent++
	}
	return resent, 0
}
