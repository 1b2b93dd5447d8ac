package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/store"
)

// A settled batch writes one audit entry, which its items name: the failure's audit history
// shows it as that failure's entry with the item's outcome (and a failed item's error), the
// job's audit lists it once per item, and its pages step through a batch item by item.
func TestBatchAuditEntryShownPerItem(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	var ids []uuid.UUID
	for range 5 {
		ids = append(ids, insertFixture(t, pool, fixtureRow{State: store.StatePermanent}))
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	token := []byte("0123456789abcdef0123456789abcdef")
	job, err := s.CreateJob(ctx, store.CreateJobParams{Action: "retry", IDs: ids, Principal: "bob", Reason: "replay",
		Selection: map[string]any{"ids": 5}, RateLimit: 10, Token: token, Now: now, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartJob(ctx, job.ID, token, "bob", now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimJob(ctx, "me", now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	b, err := s.ClaimJobBatch(ctx, store.ClaimJobBatchParams{JobID: job.ID, Owner: "me", Limit: 10, Now: now})
	if err != nil || len(b.Items) != 5 {
		t.Fatalf("batch = %+v, %v", b, err)
	}
	for _, it := range b.Items {
		if it.CreatedAt.IsZero() {
			t.Errorf("item %d does not know its failure's created_at", it.Seq)
		}
	}
	sends := make([]store.JobSend, len(b.Items))
	for i, it := range b.Items {
		sends[i] = store.JobSend{Seq: it.Seq, FailureID: it.FailureID, CreatedAt: it.CreatedAt, Acked: i != 1}
		if i == 1 {
			sends[i].Error, sends[i].NextAttemptAt = "broker down", now
		}
	}
	reason := "replay"
	at := now.Add(time.Second)
	j, err := s.SettleJobClaim(ctx, store.SettleJobClaimParams{JobID: job.ID, ClaimID: b.ClaimID, Sends: sends, At: at,
		Audit: &store.AuditEntry{Action: "retry", Principal: "bob", Reason: &reason, Details: map[string]any{"job_id": job.ID.String()}},
		Item:  map[store.JobItemOutcome]map[string]any{store.JobItemDone: {"outcome": "resent"}, store.JobItemFailed: {"outcome": "failed"}}})
	if err != nil || j.Done != 4 || j.Failed != 1 {
		t.Fatalf("settle = %+v, %v", j, err)
	}
	var entries int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE job_id = $1 AND action = 'retry'`, job.ID).Scan(&entries); err != nil || entries != 1 {
		t.Fatalf("%d retry entries of the job (%v), want one for the batch", entries, err)
	}

	for i, id := range ids {
		audit, err := s.FailureAudit(ctx, id, 10)
		if err != nil || len(audit) != 1 {
			t.Fatalf("audit of failure %d = %+v, %v", i, audit, err)
		}
		e := audit[0]
		want := "resent"
		if i == 1 {
			want = "failed"
		}
		if e.Action != "retry" || e.FailureID == nil || *e.FailureID != id || e.Principal != "bob" || e.Reason == nil || *e.Reason != "replay" ||
			!e.At.Equal(at) || e.Details["job_id"] != job.ID.String() || e.Details["outcome"] != want || e.Details["batch"] != nil {
			t.Errorf("audit of failure %d = %+v", i, e)
		}
		if i == 1 && e.Details["error"] != "broker down" {
			t.Errorf("the failed item's entry has no error: %+v", e.Details)
		}
	}

	all, err := s.JobAudit(ctx, job.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]int{}
	for _, e := range all {
		actions[e.Action]++
	}
	if len(all) != 7 || actions["job_preview"] != 1 || actions["job_start"] != 1 || actions["retry"] != 5 || all[0].FailureID != nil || all[2].FailureID == nil {
		t.Errorf("job audit = %v (%d entries)", actions, len(all))
	}
	// Pages of two: the batch's five items come one after the other, none twice.
	var (
		after *store.AuditPosition
		seen  = map[uuid.UUID]int{}
		pages int
	)
	for {
		page, next, err := s.JobAuditPage(ctx, job.ID, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if e.FailureID != nil {
				seen[*e.FailureID]++
			}
		}
		pages++
		if next == nil || pages > 10 {
			break
		}
		after = next
	}
	if pages != 4 || len(seen) != 5 {
		t.Errorf("%d pages, items seen %v, want 4 pages and 5 items once each", pages, seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("failure %s on %d pages", id, n)
		}
	}
}

// EnsurePartitions creates the audit log's and job items' periods with the failure tables';
// DropExpiredLogPartitions drops an expired period with its finished jobs, and keeps one where
// a job is not finished until it is.
func TestLogPartitions(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	const week = 7 * 24 * time.Hour
	far := time.Date(2031, 3, 1, 0, 0, 0, 0, time.UTC)
	res, err := s.EnsurePartitions(ctx, store.EnsurePartitionsParams{Now: far, Width: week, Ahead: week})
	if err != nil || len(res.LogCreated) == 0 || len(res.LogCreated) != len(res.Created) {
		t.Fatalf("ensure = %+v, %v", res, err)
	}
	part := res.LogCreated[0]
	token := []byte("0123456789abcdef0123456789abcdef")
	mk := func(at time.Time) *store.Job {
		t.Helper()
		id := insertFixture(t, pool, fixtureRow{State: store.StatePermanent})
		job, err := s.CreateJob(ctx, store.CreateJobParams{Action: "close", IDs: []uuid.UUID{id}, Principal: "bob",
			Selection: map[string]any{"ids": 1}, RateLimit: 10, Token: token, Now: at, ExpiresAt: at.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	done := mk(part.From.Add(time.Hour))
	open := mk(part.From.Add(2 * time.Hour))
	if _, err := pool.Exec(ctx, `UPDATE jobs SET state = 'DONE' WHERE id = $1`, done.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE jobs SET state = 'PAUSED' WHERE id = $1`, open.ID); err != nil {
		t.Fatal(err)
	}
	var where string
	if err := pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM job_items WHERE job_id = $1`, done.ID).Scan(&where); err != nil ||
		where != "job_items_"+part.Name {
		t.Fatalf("the job's items are in %q (%v), want job_items_%s", where, err, part.Name)
	}
	if err := s.AppendAudit(ctx, []store.AuditEntry{{Action: "job_pause", Principal: "ann", Details: map[string]any{"job_id": open.ID.String()}},
		{Action: "job_cancel", Principal: "ann", Details: map[string]any{"job_id": open.ID.String()}}}, part.From.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT min(tableoid::regclass::text) FROM audit_log WHERE job_id = $1 AND action = 'job_pause'`, open.ID).Scan(&where); err != nil ||
		where != "audit_log_"+part.Name {
		t.Fatalf("the job's entry is in %q (%v), want audit_log_%s", where, err, part.Name)
	}

	later := part.To.Add(400 * 24 * time.Hour)
	if _, err := s.DropExpiredLogPartitions(ctx, store.LogRetentionParams{Now: later}); err == nil {
		t.Error("a zero age was accepted")
	}
	got, err := s.DropExpiredLogPartitions(ctx, store.LogRetentionParams{Now: later, Age: 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var mine *store.DroppedLogPeriod
	for i := range got.Periods {
		if got.Periods[i].Name == part.Name {
			mine = &got.Periods[i]
		}
	}
	if mine == nil || !mine.Waiting {
		t.Fatalf("periods = %+v, want %s waiting for its paused job", got.Periods, part.Name)
	}
	if _, err := s.JobByID(ctx, done.ID); err != nil {
		t.Errorf("the finished job of a waiting period is gone: %v", err)
	}

	if _, err := pool.Exec(ctx, `UPDATE jobs SET state = 'CANCELED' WHERE id = $1`, open.ID); err != nil {
		t.Fatal(err)
	}
	got, err = s.DropExpiredLogPartitions(ctx, store.LogRetentionParams{Now: later, Age: 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mine = nil
	for i := range got.Periods {
		if got.Periods[i].Name == part.Name {
			mine = &got.Periods[i]
		}
	}
	if mine == nil || mine.Waiting || mine.Jobs != 2 || mine.Items != 2 || mine.Entries != 2 {
		t.Fatalf("periods = %+v, want %s dropped with 2 jobs, 2 items, 2 entries", got.Periods, part.Name)
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('job_items_' || $1::text) IS NOT NULL OR to_regclass('audit_log_' || $1::text) IS NOT NULL`,
		part.Name).Scan(&exists); err != nil || exists {
		t.Errorf("the period's tables still exist (%v)", err)
	}
	for _, id := range []uuid.UUID{done.ID, open.ID} {
		if _, err := s.JobByID(ctx, id); err == nil {
			t.Errorf("job %s of the dropped period is still there", id)
		}
	}
}
