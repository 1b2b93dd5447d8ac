package jobs

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// ChainFollower is implemented by a Publisher that releases the ordering chains of resent
// heads (*resend.Resender): after a retry job's batch is settled, the runner hands it the
// batch's acknowledged failures, and it resends, for each that heads a chain, the open parked
// failures behind it in offset order (as an operator's retry of the head does). The runner
// asks for each follower to wait for the job's rate limiter and to be recorded as an item of
// the job (done, skipped or failed), so that the job's counts include its followers.
type ChainFollower interface {
	// FollowChains releases the chains of req.Heads (resendtype.ChainRequest).
	FollowChains(ctx context.Context, req resendtype.ChainRequest) ([]resendtype.ChainFollowed, error)
}

// followChains has the publisher release, after the heads of ordering chains among the
// batch's acknowledged records, the failures parked behind them (ChainFollower), as items of
// the job, at the job's rate. Only a retry job follows chains: a resend_to job sends to
// another topic, where no guard waits. A stop of the job (pause, cancel, the runner's end)
// ends the wait for the rate limiter: the followers not sent yet are skipped as not attempted
// and keep their state.
// causing holds the causing message of each failure sent (ResendItem.CausingMessage).
func (j *jobRun) followChains(ctx context.Context, sends []store.JobSend, causing map[uuid.UUID]string) {
	f, ok := j.r.cfg.Publisher.(ChainFollower)
	if !ok || j.job.Action != actionRetry {
		return
	}
	var (
		acked        []uuid.UUID
		ackedAt      = []time.Time{} // nil once a created_at is not known
		ackedCausing = []string{}    // nil once a causing message is not known
	)
	for _, s := range sends {
		if !s.Acked {
			continue
		}
		acked = append(acked, s.FailureID)
		if ackedAt != nil && !s.CreatedAt.IsZero() {
			ackedAt = append(ackedAt, s.CreatedAt)
		} else {
			ackedAt = nil
		}
		if c, ok := causing[s.FailureID]; ok && ackedCausing != nil {
			ackedCausing = append(ackedCausing, c)
		} else {
			ackedCausing = nil
		}
	}
	if len(acked) == 0 {
		return
	}
	var reason string
	if j.job.Reason != nil {
		reason = *j.job.Reason
	}
	id := j.job.ID
	req := resendtype.ChainRequest{Heads: acked, HeadsCreatedAt: ackedAt, HeadsCausing: ackedCausing, JobID: &id,
		Request: resendtype.ManualRequest{Principal: j.job.Principal, Reason: reason, Details: map[string]any{"job_id": id.String()}}}
	if lim := j.limiter; lim != nil {
		req.Wait = func(context.Context) error { return lim.WaitN(j.ctx, 1) }
	}
	// The batch's deadline bounds its send and settle, not a chain sent at the job's rate.
	out, err := f.FollowChains(context.WithoutCancel(ctx), req)
	if err != nil {
		j.log.Error("jobs: the chains of resent heads were not released", "error", err)
		return
	}
	resent, other := 0, 0
	for _, c := range out {
		for _, it := range c.Items {
			if it.Outcome == resendtype.OutcomeResent {
				resent++
			} else {
				other++
			}
		}
	}
	if resent+other > 0 {
		j.log.Info("jobs: failures parked behind resent heads released as items of the job", "resent", resent, "not_resent", other)
	}
}
