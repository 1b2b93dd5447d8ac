package resend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// ChainRequest asks for the release of the ordering chains of failures whose action
// succeeded (resendtype.ChainRequest).
type ChainRequest = resendtype.ChainRequest

// ChainFollowed is what became of the followers of one head (resendtype.ChainFollowed).
type ChainFollowed = resendtype.ChainFollowed

// ChainHooks are called while an ordering chain is released, for fault injection in tests.
type ChainHooks struct {
	// AfterFollower is called once a follower's resend is recorded. An error makes the
	// resender stop the release as a crashed instance would: it sends and records nothing
	// more, and the release stays for a resender to finish after its lease.
	AfterFollower func(ctx context.Context, release, follower uuid.UUID) error
}

// maxReleasesPerRound bounds the interrupted releases one resender finishes per round.
const maxReleasesPerRound = 16

// followChains releases, after the heads of ordering-guard chains among acked (ids the broker
// acknowledged, in send order), the open failures parked behind each head, as an operator's
// retry of the head does, with audit entries of the trigger "auto". It returns how many
// followers were resent and how many were not.
// ackedAt and causing hold the created_at and the causing message of each of acked.
func (s *Scheduler) followChains(ctx context.Context, acked []uuid.UUID, ackedAt []time.Time, causing []string) (resent, failed int) {
	req := ChainRequest{Heads: acked, HeadsCreatedAt: ackedAt, HeadsCausing: causing, Request: ManualRequest{Principal: s.cfg.ServiceName}}
	for _, f := range s.resender.followChains(ctx, req, TriggerAuto) {
		for _, it := range f.Items {
			if it.Outcome == OutcomeResent {
				resent++
			} else {
				failed++
			}
		}
	}
	return resent, failed
}

// FollowChains releases the ordering chains of req.Heads, failures whose action succeeded
// (resent and acknowledged, or closed with req.Release): for each that heads a chain, its
// open parked failures are resent one at a time in offset order, each claimed, sent,
// acknowledged and marked RESENT before the next, with an audit entry each (req.Request's
// principal and details, plus "ordering_chain", "head", "release" and "release_id"); a
// failure parked behind a CLOSED head, resent, releases those after it with the release
// header (resendtype.PlanChain). Each follower waits for req.Wait, or else for the manual
// rate limit. The first follower that is not resent stops the rest of its chain. With
// req.JobID each follower is recorded as an item of the job. The release is recorded before
// the first follower is sent, so that one an instance's end interrupts is finished by another
// resender (ResumeChainReleases), each follower once. It returns an error wrapping
// ErrInvalidRequest without a principal, and ErrClosed once the Resender is shut down.
func (r *Resender) FollowChains(ctx context.Context, req ChainRequest) ([]ChainFollowed, error) {
	if req.Request.Principal == "" {
		return nil, fmt.Errorf("%w: a principal is required", ErrInvalidRequest)
	}
	if !r.enter() {
		return nil, ErrClosed
	}
	defer r.inflight.Done()
	return r.followChains(ctx, req, TriggerManual), nil
}

// followChains is FollowChains for trigger. The scheduler (TriggerAuto) follows heads only;
// a manual request also the parked failures among its heads. Only the ids that one query
// (store.WithParkedFollowers or store.ChainCandidates) finds have their chain read.
func (r *Resender) followChains(ctx context.Context, req ChainRequest, trigger string) []ChainFollowed {
	if len(req.Heads) == 0 {
		return nil
	}
	log := r.s.cfg.Logger
	var (
		heads []uuid.UUID
		err   error
	)
	if trigger == TriggerAuto {
		heads, err = r.s.store.WithParkedFollowers(ctx, chainHeads(req))
	} else {
		heads, err = r.s.store.ChainCandidates(ctx, chainHeads(req))
	}
	if err != nil {
		log.Error("ordering chains of resent failures unknown: their parked failures wait for an operator", "error", err)
		return nil
	}
	var out []ChainFollowed
	for _, id := range heads {
		ch, err := r.s.store.ParkedChain(ctx, id)
		if err != nil {
			log.Error("ordering chain of a resent failure unknown: its parked failures wait for an operator", "id", id, "error", err)
			continue
		}
		plan := resendtype.PlanChain(ch, id, req.Release)
		if len(plan.Follow) == 0 {
			continue
		}
		now := r.s.cfg.Now()
		rel := store.ChainRelease{ID: uuid.New(), HeadID: id, Head: ch.HeadRef, Release: plan.Release != "",
			Principal: req.Request.Principal, Reason: req.Request.Reason, Trigger: trigger, Details: req.Request.Details,
			JobID: req.JobID, Owner: r.owner, LeaseUntil: now.Add(r.s.cfg.Lease), CreatedAt: now}
		if plan.Own {
			for _, l := range ch.Parked {
				if l.ID == id {
					off := l.Offset
					rel.AfterOffset = &off
				}
			}
		}
		if err := r.s.store.StartChainRelease(ctx, rel, len(plan.Follow)); err != nil {
			log.Error("a release of an ordering chain could not be recorded: its parked failures wait for an operator", "head", id, "error", err)
			out = append(out, ChainFollowed{Head: id, Items: notAttempted(plan.Follow, "not attempted: the release could not be recorded (database error)")})
			continue
		}
		items, dead := r.release(ctx, rel, plan.Follow, req.Wait)
		out = append(out, ChainFollowed{Head: id, Items: items})
		if dead {
			return out
		}
		r.endRelease(ctx, rel, items)
	}
	return out
}

// chainHeads are the heads of req for the store's look-up.
func chainHeads(req ChainRequest) store.ChainHeads {
	return store.ChainHeads{IDs: req.Heads, CreatedAt: req.HeadsCreatedAt, Causing: req.HeadsCausing}
}

// notAttempted returns failed outcomes with reason for follow.
func notAttempted(follow []store.ParkedLink, reason string) []ItemResult {
	out := make([]ItemResult, len(follow))
	for i, l := range follow {
		out[i] = ItemResult{ID: l.ID, Outcome: OutcomeFailed, State: l.State, Error: reason}
	}
	return out
}

// releaseRequest is the request of a release's resends: its principal and reason, its
// details plus those naming the chain, and the release header when the head was closed.
func releaseRequest(rel store.ChainRelease) ManualRequest {
	details := map[string]any{}
	for k, v := range rel.Details {
		details[k] = v
	}
	details["ordering_chain"], details["head"], details["release"], details["release_id"] = true, rel.HeadID.String(), rel.Release, rel.ID.String()
	if rel.JobID != nil {
		details["job_id"] = rel.JobID.String()
	}
	req := ManualRequest{Principal: rel.Principal, Reason: rel.Reason, Details: details}
	if rel.Release {
		req.Headers = []avro.Header{{Name: avro.HeaderRelease, Value: []byte(rel.Head)}}
	}
	return req
}

// releaseTag is the resendtype.HeaderReleaseItem value of a follower of rel.
func releaseTag(rel uuid.UUID, id uuid.UUID) string { return rel.String() + "/" + id.String() }

// release resends follow in order for rel, each after wait (or the manual rate limit for a
// manual release), and stops at the first that is not resent (the rest are reported not
// attempted). With rel.JobID each outcome is recorded as an item of the job as it is known.
// dead reports that a ChainHooks.AfterFollower hook stopped it as a crash would.
func (r *Resender) release(ctx context.Context, rel store.ChainRelease, follow []store.ParkedLink, wait func(context.Context) error) (out []ItemResult, dead bool) {
	req := releaseRequest(rel)
	log := r.s.cfg.Logger
	if wait == nil && rel.Trigger == TriggerManual {
		wait = func(ctx context.Context) error { return r.limiter.Wait(ctx) }
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.stopCtx, cancel)()
	for i, l := range follow {
		if wait != nil {
			if err := wait(wctx); err != nil {
				out = append(out, notAttempted(follow[i:], "not attempted: rate limit: "+err.Error())...)
				r.auditOnly(out[i:], req, rel.Trigger)
				break
			}
		}
		tag := avro.Header{Name: resendtype.HeaderReleaseItem, Value: []byte(releaseTag(rel.ID, l.ID))}
		edit := func(it *store.ResendItem) {
			hs := slices.DeleteFunc(slices.Clone(it.Headers), func(h avro.Header) bool { return h.Name == resendtype.HeaderReleaseItem })
			it.Headers = append(append(hs, req.Headers...), tag)
		}
		part := []ItemResult{{ID: l.ID}}
		r.resendChunk(ctx, part, req, edit, rel.Trigger)
		r.s.metrics.resends.WithLabelValues(rel.Trigger, string(part[0].Outcome)).Inc()
		out = append(out, part[0])
		r.recordJobItems(ctx, rel, part)
		if h := r.s.cfg.ChainHooks.AfterFollower; h != nil {
			if err := h(ctx, rel.ID, l.ID); err != nil {
				log.Warn("chain release stopped by a hook", "release", rel.ID, "error", err)
				return out, true
			}
		}
		if part[0].Outcome != OutcomeResent {
			log.Warn("a failure parked behind a resolved head was not resent: it and those after it wait for an operator",
				"head", rel.HeadID, "id", l.ID, "outcome", part[0].Outcome, "error", part[0].Error, "left", len(follow)-i-1)
			out = append(out, notAttempted(follow[i+1:], resendtype.NotAttemptedInOrder)...)
			break
		}
		now := r.s.cfg.Now()
		if err := r.s.store.RenewChainRelease(ctx, rel.ID, r.owner, now.Add(r.s.cfg.Lease)); err != nil {
			// Another resender took the release over after its lease: it finishes it.
			log.Warn("chain release taken over: the rest is another resender's", "release", rel.ID, "error", err)
			return out, true
		}
	}
	return out, false
}

// jobOutcome is the job item outcome of a follower's resend.
func jobOutcome(it ItemResult) store.ChainJobItem {
	o := store.ChainJobItem{FailureID: it.ID, Detail: it.Error}
	switch {
	case it.Outcome == OutcomeResent:
		o.Outcome, o.Detail = store.JobItemDone, ""
	case it.Outcome == OutcomeNotFound || it.Outcome == OutcomeConflict || strings.HasPrefix(it.Error, "not attempted"):
		o.Outcome = store.JobItemSkipped
	default:
		o.Outcome = store.JobItemFailed
	}
	return o
}

// recordJobItems records items as items of rel's job (none without one).
func (r *Resender) recordJobItems(ctx context.Context, rel store.ChainRelease, items []ItemResult) {
	if rel.JobID == nil || len(items) == 0 {
		return
	}
	add := make([]store.ChainJobItem, len(items))
	for i, it := range items {
		add[i] = jobOutcome(it)
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	if _, err := r.s.store.AddChainJobItems(bctx, rel.ID, *rel.JobID, add, r.s.cfg.Now()); err != nil {
		r.s.cfg.Logger.Error("followers of a job's head not recorded as its items; the release's next holder records them", "job", rel.JobID, "error", err)
	}
}

// endRelease records the outcomes of items as items of rel's job (once: those release
// recorded already are kept, the followers not attempted are added) and deletes rel.
func (r *Resender) endRelease(ctx context.Context, rel store.ChainRelease, items []ItemResult) {
	r.recordJobItems(ctx, rel, items)
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	if err := r.s.store.EndChainRelease(bctx, rel.ID, r.owner, r.s.cfg.Now()); err != nil {
		r.s.cfg.Logger.Error("a finished chain release could not be deleted: the resender that takes it over finds nothing left to do", "release", rel.ID, "error", err)
	}
}

// ResumeChainReleases finishes the releases of ordering chains that an instance's end
// interrupted (their lease ended): for each, it reads which followers were resent (the audit
// entries written with their state), asks the broker which of the others arrived (their
// resendtype.HeaderReleaseItem header) and marks those RESENT without sending them again,
// then resends the rest in order, as the release would have; a job's followers are recorded
// as its items. So every follower is released once, in order. The scheduler calls it every
// Interval. It returns how many releases it finished.
func (r *Resender) ResumeChainReleases(ctx context.Context) (int, error) {
	if !r.enter() {
		return 0, ErrClosed
	}
	defer r.inflight.Done()
	now := r.s.cfg.Now()
	rels, err := r.s.store.ClaimChainReleases(ctx, r.owner, now, now.Add(r.s.cfg.Lease), maxReleasesPerRound)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, rel := range rels {
		if err := r.resume(ctx, rel); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// resume finishes rel, which this resender claimed after its lease.
func (r *Resender) resume(ctx context.Context, rel store.ChainRelease) error {
	log := r.s.cfg.Logger.With("release", rel.ID, "head", rel.HeadID)
	members, err := r.s.store.ParkedBehind(ctx, rel.Head, store.MaxParkedChain)
	if err != nil {
		return err
	}
	if rel.AfterOffset != nil {
		members = slices.DeleteFunc(members, func(l store.ParkedLink) bool { return l.Offset <= *rel.AfterOffset })
	}
	outcomes, err := r.s.store.ReleaseOutcomes(ctx, rel.ID)
	if err != nil {
		return err
	}
	var (
		done    []ItemResult // followers with their outcome recorded
		pending []store.ParkedLink
		stopped bool
	)
	for _, m := range members {
		if o, ok := outcomes[m.ID]; ok {
			done = append(done, ItemResult{ID: m.ID, Outcome: Outcome(o), State: m.State})
			if o != string(OutcomeResent) {
				stopped = true
				break
			}
			continue
		}
		if m.State.Resendable() {
			pending = append(pending, m)
		}
	}
	var items []ItemResult
	if stopped {
		items = notAttempted(pending, resendtype.NotAttemptedInOrder)
	} else if len(pending) > 0 {
		// Those that arrived before the interruption (sent, not recorded) are marked, not sent.
		arrived, err := r.arrived(ctx, rel, pending)
		if err != nil {
			return err
		}
		req := releaseRequest(rel)
		for len(pending) > 0 && arrived[pending[0].ID] {
			l := pending[0]
			pending = pending[1:]
			details := map[string]any{}
			for k, v := range req.Details {
				details[k] = v
			}
			details["outcome"], details["trigger"], details["resending_service"], details["from_state"] = string(OutcomeResent), rel.Trigger, r.s.cfg.ServiceName, string(l.State)
			details["recovered"] = true
			var reason *string
			if rel.Reason != "" {
				reason = &rel.Reason
			}
			id := l.ID
			if _, err := r.s.store.MarkArrivedResent(ctx, l.ID, r.s.cfg.Now(), store.AuditEntry{FailureID: &id, Action: AuditActionRetry,
				Principal: rel.Principal, Reason: reason, Details: details}); err != nil {
				return err
			}
			done = append(done, ItemResult{ID: l.ID, Outcome: OutcomeResent, State: l.State})
			log.Info("a follower of an interrupted release had arrived: marked RESENT, not sent again", "id", l.ID)
		}
		// The job's rate limiter is its runner's: a resumed release sends at the manual rate.
		var dead bool
		if items, dead = r.release(ctx, rel, pending, nil); dead {
			return nil
		}
	}
	r.endRelease(ctx, rel, append(done, items...))
	log.Info("an interrupted chain release finished", "already", len(done), "sent", len(items))
	return nil
}

// arrived reports which of pending reached the broker for rel (their HeaderReleaseItem tags).
func (r *Resender) arrived(ctx context.Context, rel store.ChainRelease, pending []store.ParkedLink) (map[uuid.UUID]bool, error) {
	ids := make([]uuid.UUID, len(pending))
	for i, l := range pending {
		ids[i] = l.ID
	}
	recs, err := r.s.store.ResendItems(ctx, ids)
	if err != nil {
		return nil, err
	}
	tagged := make([]resendtype.Tagged, 0, len(recs))
	for _, rec := range recs {
		tagged = append(tagged, resendtype.Tagged{Topic: rec.Topic, Partition: rec.Partition, Tag: releaseTag(rel.ID, rec.ID)})
	}
	// A minute of margin covers a broker that stamps records with its own clock.
	found, err := r.Delivered(ctx, rel.CreatedAt.Add(-time.Minute), tagged)
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID]bool{}
	for _, id := range ids {
		out[id] = found[releaseTag(rel.ID, id)]
	}
	return out, nil
}
