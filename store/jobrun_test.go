package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/store"
)

// A job's claim holds its failures against every other resend and a close until it is settled,
// never expires, and is settled once: the settle marks, records and counts in one go.
func TestJobClaimHoldsUntilSettled(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	var ids []uuid.UUID
	for range 4 {
		ids = append(ids, insertFixture(t, pool, fixtureRow{State: store.StatePermanent}))
	}
	closed := insertFixture(t, pool, fixtureRow{State: store.StateClosed})
	now := time.Now()
	token := []byte("0123456789abcdef0123456789abcdef")
	job, err := s.CreateJob(ctx, store.CreateJobParams{Action: "retry", IDs: append(append([]uuid.UUID{}, ids...), closed), Principal: "bob",
		Selection: map[string]any{"ids": 5}, RateLimit: 10, Token: token, Now: now, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartJob(ctx, job.ID, token, "bob", now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimJobBatch(ctx, store.ClaimJobBatchParams{JobID: job.ID, Owner: "me", Limit: 10, Now: now}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("claim of a job not held: %v, want ErrLeaseLost", err)
	}
	if _, err := s.ClaimJob(ctx, "me", now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	b, err := s.ClaimJobBatch(ctx, store.ClaimJobBatchParams{JobID: job.ID, Owner: "me", Limit: 10, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if b.ClaimID == 0 || len(b.Items) != 4 || b.Skipped != 1 || b.Last != 5 || b.Job.Skipped != 1 {
		t.Fatalf("batch = %+v, job %+v", b, b.Job)
	}
	// Long after any resend lease, nobody else takes them.
	later := now.Add(24 * time.Hour)
	_, refused, err := s.ClaimResends(ctx, store.ClaimResendsParams{Owner: "other", IDs: ids, Now: later, LeaseUntil: later.Add(time.Minute)})
	if err != nil || len(refused) != 4 || !refused[ids[0]].InProgress {
		t.Errorf("another resend claimed the job's failures: %v, %v", refused, err)
	}
	res, err := s.CloseFailures(ctx, store.CloseRequest{IDs: ids[:1], Principal: "eve", Reason: "r"})
	if err != nil || res[0].Outcome != store.CloseConflict {
		t.Errorf("close of a claimed failure = %+v, %v", res, err)
	}
	claims, err := s.JobClaims(ctx, job.ID)
	if err != nil || len(claims) != 1 || claims[0].ID != b.ClaimID || len(claims[0].Items) != 4 || claims[0].Items[0].Seq != 1 {
		t.Fatalf("job claims = %+v, %v", claims, err)
	}
	// A second batch finds nothing left outside the claim.
	if b2, err := s.ClaimJobBatch(ctx, store.ClaimJobBatchParams{JobID: job.ID, Owner: "me", Limit: 10, Now: now}); err != nil || b2.Last != 0 || b2.ClaimID != 0 {
		t.Errorf("second batch = %+v, %v", b2, err)
	}
	sends := []store.JobSend{
		{Seq: 1, FailureID: ids[0], Acked: true},
		{Seq: 2, FailureID: ids[1], Error: "broker said no", NextAttemptAt: later},
		{Seq: 3, FailureID: ids[2], Skipped: "gone"},
		// Seq 4 was not attempted: it stays pending.
	}
	j, err := s.SettleJobClaim(ctx, store.SettleJobClaimParams{JobID: job.ID, ClaimID: b.ClaimID, Sends: sends, At: now})
	if err != nil {
		t.Fatal(err)
	}
	if j.Done != 1 || j.Failed != 1 || j.Skipped != 2 || j.Remaining() != 1 || j.State != store.JobRunning {
		t.Errorf("job after settle = %+v", j)
	}
	if _, err := s.SettleJobClaim(ctx, store.SettleJobClaimParams{JobID: job.ID, ClaimID: b.ClaimID, Sends: sends, At: now}); !errors.Is(err, store.ErrClaimSettled) {
		t.Errorf("second settle: %v, want ErrClaimSettled", err)
	}
	var st store.State
	if err := pool.QueryRow(ctx, `SELECT state FROM failures WHERE id = $1`, ids[0]).Scan(&st); err != nil || st != store.StateResent {
		t.Errorf("acked failure is %s (%v)", st, err)
	}
	var failures int
	if err := pool.QueryRow(ctx, `SELECT resend_failures FROM failures WHERE id = $1`, ids[1]).Scan(&failures); err != nil || failures != 1 {
		t.Errorf("refused failure counts %d resend failures (%v)", failures, err)
	}
	// The item not attempted is claimed again; settled, the job is DONE.
	b3, err := s.ClaimJobBatch(ctx, store.ClaimJobBatchParams{JobID: job.ID, Owner: "me", Limit: 10, Now: now})
	if err != nil || len(b3.Items) != 1 || b3.Items[0].Seq != 4 {
		t.Fatalf("batch after settle = %+v, %v", b3, err)
	}
	j, err = s.SettleJobClaim(ctx, store.SettleJobClaimParams{JobID: job.ID, ClaimID: b3.ClaimID,
		Sends: []store.JobSend{{Seq: 4, FailureID: ids[3], Acked: true}}, At: now})
	if err != nil || j.State != store.JobDone || j.Done != 2 || j.FinishedAt == nil {
		t.Errorf("job after the last settle = %+v, %v", j, err)
	}
}
