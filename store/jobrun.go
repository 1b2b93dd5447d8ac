package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The statements of the jobs runner (package jobs). A batch of a retry job is claimed,
// sent and settled:
//
//   - ClaimJobBatch claims the batch's failures with one resend claim that names the job and
//     its items (migration 017) and never expires, and records, in the same transaction, the
//     items that cannot be resent as skipped;
//   - the runner sends the records;
//   - SettleJobClaim deletes the claim, marks the acknowledged failures RESENT, records the
//     unacknowledged sends, and records every item's outcome with the job's counts and the
//     audit entries, in one transaction: the outcome of a resend is recorded with its mark.
//
// A job that resumes after a crash finds its own unsettled claims (JobClaims) and settles
// them; no other resend ever takes their failures meanwhile. A close job's batch is one
// transaction (CloseJobBatch).

// JobBatchItem is one claimed item of a job's batch.
type JobBatchItem struct {
	Seq       int64
	FailureID uuid.UUID
}

// JobBatch is a batch of a retry job's items claimed for sending.
type JobBatch struct {
	// ClaimID identifies the claim; 0 when the batch claimed nothing.
	ClaimID int64
	// ClaimedAt is when the claim was taken.
	ClaimedAt time.Time
	// Items are the claimed items, in order.
	Items []JobBatchItem
	// Skipped is how many items the claim recorded as skipped.
	Skipped int
	// Last is the highest sequence number the batch looked at; 0 when no pending item is left
	// after the cursor.
	Last int64
	// Job is the job after the skipped items were recorded.
	Job *Job
}

// ClaimJobBatchParams are the parameters of ClaimJobBatch.
type ClaimJobBatchParams struct {
	JobID uuid.UUID
	// Owner is the instance that holds the job; the claim names it.
	Owner string
	// After is the cursor: only items after this sequence number are looked at.
	After int64
	// Limit bounds the items looked at; it must be positive.
	Limit int
	Now   time.Time
}

// pendingJobItemsSQL selects, for the job $1, up to $3 items without an outcome after the
// sequence number $2 that no claim of the job holds, with their failure's state (NULL when
// the failure does not exist) and whether a live claim holds it at $4.
const pendingJobItemsSQL = `
	SELECT i.seq, i.failure_id, f.state, coalesce(f.id IN (` + `SELECT unnest(c.failure_ids) FROM resend_claims c WHERE c.lease_until > $4` + `), false)
	FROM job_items i LEFT JOIN failures f ON f.id = i.failure_id
	WHERE i.job_id = $1 AND i.seq > $2 AND i.outcome IS NULL
		AND i.seq NOT IN (SELECT unnest(c.job_seqs) FROM resend_claims c WHERE c.job_id = $1)
	ORDER BY i.seq LIMIT $3`

type pendingJobItem struct {
	seq    int64
	id     uuid.UUID
	state  *State
	leased bool
}

func readPendingJobItems(ctx context.Context, tx pgx.Tx, jobID uuid.UUID, after int64, limit int, now time.Time) ([]pendingJobItem, error) {
	rows, err := tx.Query(ctx, pendingJobItemsSQL, jobID, after, limit, now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (pendingJobItem, error) {
		var (
			it pendingJobItem
			id [16]byte // not uuid.UUID: see uuids.go
		)
		err := r.Scan(&it.seq, &id, &it.state, &it.leased)
		it.id = id
		return it, err
	})
}

// holdJob fails with ErrLeaseLost unless owner holds the job RUNNING. It does not lock the
// job's row, which the settles of the job's other batches update meanwhile: a pause or cancel
// that commits just after the check lets this one batch go on, as one already sending does.
func holdJob(ctx context.Context, tx pgx.Tx, jobID uuid.UUID, owner string) error {
	var held bool
	err := tx.QueryRow(ctx, `SELECT state = 'RUNNING' AND owner IS NOT DISTINCT FROM $2 FROM jobs WHERE id = $1`, jobID, owner).Scan(&held)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	if !held {
		return ErrLeaseLost
	}
	return nil
}

// Details of skipped job items.
const (
	skipNotFound   = "no failure has this id (deleted since the preview?)"
	skipInProgress = "a resend of this failure by another instance or operator was in progress"
)

// skipDetail says why a failure in state st (nil: it does not exist) is not acted on.
func skipDetail(id uuid.UUID, st *State, action string) string {
	if st == nil {
		return skipNotFound
	}
	return "state changed since the preview: " + (&TransitionError{ID: id, From: *st, Action: action}).Error()
}

// ClaimJobBatch claims the next items of a retry job held by p.Owner: up to p.Limit items
// after p.After without an outcome and outside the job's other claims. Those whose failure is
// RETRY_PENDING or PERMANENT and held by no other resend are claimed, in one claim that names
// the job and the items and holds them until SettleJobClaim or ReleaseJobClaim; the others are
// recorded skipped with the reason, in the same transaction. It returns ErrLeaseLost, doing
// nothing, when p.Owner does not hold the job RUNNING.
func (s *Store) ClaimJobBatch(ctx context.Context, p ClaimJobBatchParams) (*JobBatch, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("claim job batch: limit %d must be positive", p.Limit)
	}
	b := &JobBatch{ClaimedAt: p.Now}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := holdJob(ctx, tx, p.JobID, p.Owner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		// The claim lock after the job's row: nothing takes them in the other order.
		if _, err := tx.Exec(ctx, lockClaimsSQL); err != nil {
			return err
		}
		pending, err := readPendingJobItems(ctx, tx, p.JobID, p.After, p.Limit, p.Now)
		if err != nil {
			return err
		}
		var (
			ids     []uuid.UUID
			seqs    []int64
			skipped []JobItemResult
		)
		for _, it := range pending {
			b.Last = it.seq
			switch {
			case it.state == nil || !it.state.Resendable():
				skipped = append(skipped, JobItemResult{Seq: it.seq, Outcome: JobItemSkipped, Detail: skipDetail(it.id, it.state, "resend")})
			case it.leased:
				skipped = append(skipped, JobItemResult{Seq: it.seq, Outcome: JobItemSkipped, Detail: skipInProgress})
			default:
				ids, seqs = append(ids, it.id), append(seqs, it.seq)
				b.Items = append(b.Items, JobBatchItem{Seq: it.seq, FailureID: it.id})
			}
		}
		if len(ids) > 0 {
			if err := tx.QueryRow(ctx, `
				INSERT INTO resend_claims (owner, claimed_at, lease_until, failure_ids, job_id, job_seqs)
				VALUES ($1, $2, 'infinity', $3, $4, $5) RETURNING id`,
				p.Owner, p.Now, uuidArray(ids), p.JobID, seqs).Scan(&b.ClaimID); err != nil {
				return err
			}
		}
		b.Skipped = len(skipped)
		b.Job, err = recordJobOutcomes(ctx, tx, p.JobID, skipped, p.Now)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("claim job batch: %w", err)
	}
	return b, nil
}

// recordJobOutcomes records the outcomes of items of a job that have none yet, adds them to
// the job's counts, and makes a RUNNING or PAUSED job whose items all have their outcome DONE.
// It returns the job.
func recordJobOutcomes(ctx context.Context, tx pgx.Tx, jobID uuid.UUID, results []JobItemResult, now time.Time) (*Job, error) {
	if len(results) == 0 {
		return scanJob(tx.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, jobID))
	}
	seqs := make([]int64, len(results))
	outcomes := make([]string, len(results))
	details := make([]*string, len(results))
	first, last := results[0].Seq, results[0].Seq
	for i, r := range results {
		seqs[i], outcomes[i] = r.Seq, string(r.Outcome)
		if r.Detail != "" {
			d := r.Detail
			details[i] = &d
		}
		first, last = min(first, r.Seq), max(last, r.Seq)
	}
	row := tx.QueryRow(ctx, `
		WITH r AS (
			SELECT * FROM unnest($2::bigint[], $3::text[], $4::text[]) AS r(seq, outcome, detail)),
		u AS (
			UPDATE job_items i SET outcome = r.outcome, detail = r.detail, done_at = $5::timestamptz
			FROM r WHERE i.job_id = $1 AND i.seq BETWEEN $6 AND $7 AND i.seq = r.seq AND i.outcome IS NULL
			RETURNING i.seq, i.outcome),
		c AS (
			SELECT count(*) FILTER (WHERE outcome = 'done') AS done,
				count(*) FILTER (WHERE outcome = 'skipped') AS skipped,
				count(*) FILTER (WHERE outcome = 'failed') AS failed,
				coalesce(max(seq), 0) AS last FROM u)
		UPDATE jobs j SET done = j.done + c.done, skipped = j.skipped + c.skipped, failed = j.failed + c.failed,
			cursor_seq = greatest(j.cursor_seq, c.last), updated_at = $5,
			state = CASE WHEN j.state IN ('RUNNING', 'PAUSED')
				AND j.done + c.done + j.skipped + c.skipped + j.failed + c.failed >= j.total THEN 'DONE' ELSE j.state END,
			finished_at = CASE WHEN j.state IN ('RUNNING', 'PAUSED')
				AND j.done + c.done + j.skipped + c.skipped + j.failed + c.failed >= j.total THEN $5::timestamptz ELSE j.finished_at END
		FROM c WHERE j.id = $1
		RETURNING `+prefixed("j.", jobColumns), jobID, seqs, outcomes, details, now, first, last)
	return scanJob(row)
}

// JobSend is the outcome of sending one claimed item of a job.
type JobSend struct {
	Seq       int64
	FailureID uuid.UUID
	// CreatedAt is the failure's created_at (ResendItem.CreatedAt), or zero when not known: when
	// every send of a settle knows it, the marks search only the partitions of those times.
	CreatedAt time.Time
	// Acked says the broker acknowledged the record: the failure becomes RESENT and the item
	// done.
	Acked bool
	// Error is the producer's error for a record not acknowledged: the item is failed, and the
	// failure counts one more resend failure.
	Error string
	// NextAttemptAt is when a RETRY_PENDING failure whose send failed is due again.
	NextAttemptAt time.Time
	// Skipped, when not empty, records the item skipped with this reason instead (its record
	// could not be loaded: its failure changed outside redrive).
	Skipped string
}

// SettleJobClaimParams are the parameters of SettleJobClaim.
type SettleJobClaimParams struct {
	JobID   uuid.UUID
	ClaimID int64
	// Sends are the outcomes of the claim's items; an item of the claim without one (not
	// attempted) stays pending and is claimed again later.
	Sends []JobSend
	At    time.Time
	// Audit, when not nil, is called with the failures marked RESENT; the entries it returns are
	// written in the same transaction (an entry with a zero At gets At).
	Audit func(marked map[uuid.UUID]bool) []AuditEntry
}

// SettleJobClaim records the outcome of a job's claim in one transaction: it deletes the
// claim, marks the acknowledged failures RESENT, records the unacknowledged sends on their
// failures, records each item's outcome (an acknowledged item is done even when its failure
// had changed state and was not marked: its record was republished) with the job's counts,
// and writes the audit entries. It records outcomes whatever the job's state: the sends
// happened. It returns ErrClaimSettled, recording nothing, when the claim is gone.
func (s *Store) SettleJobClaim(ctx context.Context, p SettleJobClaimParams) (*Job, error) {
	var (
		acked    []uuid.UUID
		ackedAt  []time.Time
		failIDs  []uuid.UUID
		failAt   []time.Time
		failErrs []string
		failNext []time.Time
		allKnown = true // every send knows its failure's created_at
	)
	for _, r := range p.Sends {
		switch {
		case r.Skipped != "":
		case r.Acked:
			acked, ackedAt = append(acked, r.FailureID), append(ackedAt, r.CreatedAt)
		default:
			failIDs, failErrs, failNext = append(failIDs, r.FailureID), append(failErrs, r.Error), append(failNext, r.NextAttemptAt)
			failAt = append(failAt, r.CreatedAt)
		}
		allKnown = allKnown && (r.Skipped != "" || !r.CreatedAt.IsZero())
	}
	if !allKnown {
		ackedAt, failAt = nil, nil
	}
	var job *Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM resend_claims WHERE id = $1 AND job_id = $2`, p.ClaimID, p.JobID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrClaimSettled
		}
		marked := map[uuid.UUID]bool{}
		if len(acked) > 0 {
			args := []any{uuidArray(acked), p.At}
			where := byIDs("$1", "", ackedAt, &args)
			rows, err := tx.Query(ctx, `
				UPDATE failure_states SET state = 'RESENT', resent_at = $2, updated_at = $2
				WHERE `+where+` AND state IN ('RETRY_PENDING', 'PERMANENT')
				RETURNING id`, args...)
			if err != nil {
				return err
			}
			ids, err := collectUUIDs(rows)
			if err != nil {
				return err
			}
			for _, id := range ids {
				marked[id] = true
			}
		}
		if len(failIDs) > 0 {
			// As RecordResendFailures.
			args := []any{p.At, uuidArray(failIDs), failErrs, failNext}
			where := byIDs("$2", "f.", failAt, &args)
			if _, err := tx.Exec(ctx, `
				UPDATE failure_states f SET resend_failures = f.resend_failures + 1, last_resend_error = u.err,
					next_attempt_at = CASE WHEN f.state = 'RETRY_PENDING' THEN u.next_at ELSE f.next_attempt_at END,
					updated_at = $1
				FROM unnest($2::uuid[], $3::text[], $4::timestamptz[]) AS u(id, err, next_at)
				WHERE f.id = u.id AND `+where+` AND f.state IN ('RETRY_PENDING', 'PERMANENT')`, args...); err != nil {
				return err
			}
		}
		results := make([]JobItemResult, 0, len(p.Sends))
		for _, r := range p.Sends {
			res := JobItemResult{Seq: r.Seq}
			switch {
			case r.Skipped != "":
				res.Outcome, res.Detail = JobItemSkipped, r.Skipped
			case r.Acked && marked[r.FailureID]:
				res.Outcome = JobItemDone
			case r.Acked:
				res.Outcome, res.Detail = JobItemDone, "republished; its state had changed meanwhile, so it was not marked RESENT"
			default:
				res.Outcome, res.Detail = JobItemFailed, r.Error
			}
			results = append(results, res)
		}
		if p.Audit != nil {
			entries := p.Audit(marked)
			for i := range entries {
				if entries[i].At.IsZero() {
					entries[i].At = p.At
				}
			}
			if err := writeAudit(ctx, tx, entries); err != nil {
				return err
			}
		}
		// Last: the job's row stays locked until the commit, and the job's other batches
		// settle into it too.
		job, err = recordJobOutcomes(ctx, tx, p.JobID, results, p.At)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrClaimSettled) {
			return nil, err
		}
		return nil, fmt.Errorf("settle job claim: %w", err)
	}
	return job, nil
}

// ReleaseJobClaim deletes a job's claim without recording anything: its items stay pending.
// It returns ErrClaimSettled when the claim is gone.
func (s *Store) ReleaseJobClaim(ctx context.Context, jobID uuid.UUID, claimID int64) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM resend_claims WHERE id = $1 AND job_id = $2`, claimID, jobID)
	if err != nil {
		return fmt.Errorf("release job claim: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrClaimSettled
	}
	return nil
}

// JobClaim is an unsettled claim of a job's batch.
type JobClaim struct {
	ID    int64
	JobID uuid.UUID
	// Owner is the instance that took it (or took it over last).
	Owner     string
	ClaimedAt time.Time
	Items     []JobBatchItem
}

// JobClaims returns the unsettled claims of the job, oldest first.
func (s *Store) JobClaims(ctx context.Context, jobID uuid.UUID) ([]JobClaim, error) {
	return s.jobClaims(ctx, `WHERE c.job_id = $1`, jobID)
}

// StrandedJobClaims returns the unsettled claims, taken before cutoff, of jobs that are not
// RUNNING (paused or canceled while an instance that then died had a batch in flight), oldest
// first, at most limit.
func (s *Store) StrandedJobClaims(ctx context.Context, cutoff time.Time, limit int) ([]JobClaim, error) {
	return s.jobClaims(ctx, `JOIN jobs j ON j.id = c.job_id
		WHERE c.job_id IS NOT NULL AND j.state <> 'RUNNING' AND c.claimed_at < $1 LIMIT $2`, cutoff, limit)
}

func (s *Store) jobClaims(ctx context.Context, where string, args ...any) ([]JobClaim, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT c.id, c.job_id, c.owner, c.claimed_at, c.failure_ids, c.job_seqs FROM resend_claims c `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("job claims: %w", err)
	}
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobClaim, error) {
		var (
			c    JobClaim
			ids  [][16]byte
			seqs []int64
		)
		if err := r.Scan(&c.ID, &c.JobID, &c.Owner, &c.ClaimedAt, &ids, &seqs); err != nil {
			return c, err
		}
		if len(ids) != len(seqs) {
			return c, fmt.Errorf("job claim %d: %d failures but %d items", c.ID, len(ids), len(seqs))
		}
		c.Items = make([]JobBatchItem, len(ids))
		for i := range ids {
			c.Items[i] = JobBatchItem{Seq: seqs[i], FailureID: ids[i]}
		}
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("job claims: %w", err)
	}
	return claims, nil
}

// TakeJobClaim makes owner the owner of the job's claim when from still owns it (compare and
// swap), and reports whether it did: of two runners that recover one claim, one does.
func (s *Store) TakeJobClaim(ctx context.Context, jobID uuid.UUID, claimID int64, from, owner string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE resend_claims SET owner = $4 WHERE id = $1 AND job_id = $2 AND owner = $3`,
		claimID, jobID, from, owner)
	if err != nil {
		return false, fmt.Errorf("take job claim: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// HeartbeatJob extends owner's lease on the job to leaseUntil while owner holds it RUNNING, and
// reports whether it does: false once the job was paused, canceled, finished or taken over.
func (s *Store) HeartbeatJob(ctx context.Context, jobID uuid.UUID, owner string, leaseUntil time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE jobs SET lease_until = $3 WHERE id = $1 AND owner = $2 AND state = 'RUNNING'`,
		jobID, owner, leaseUntil)
	if err != nil {
		return false, fmt.Errorf("job heartbeat: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// FinishJob makes the job DONE when owner holds it RUNNING and none of its items lacks an
// outcome, and returns the job.
func (s *Store) FinishJob(ctx context.Context, jobID uuid.UUID, owner string, now time.Time) (*Job, error) {
	if err := s.FinishJobIfEmpty(ctx, jobID, owner, now); err != nil {
		return nil, err
	}
	return s.JobByID(ctx, jobID)
}

// CloseJobBatchParams are the parameters of CloseJobBatch.
type CloseJobBatchParams struct {
	JobID uuid.UUID
	// Owner is the instance that holds the job.
	Owner string
	// After is the cursor: only items after this sequence number are looked at.
	After int64
	// Limit bounds the items; it must be positive.
	Limit     int
	Principal string
	Reason    string
	// Details are added to every audit entry.
	Details map[string]any
	Now     time.Time
}

// CloseJobBatch closes the next items of a close job held by p.Owner and records their
// outcomes, in one transaction: up to p.Limit items after p.After without an outcome; a
// failure that is RETRY_PENDING or PERMANENT and held by no resend becomes CLOSED with an audit
// entry (done), the others are skipped with the reason. It returns the batch (without claim)
// and ErrLeaseLost, doing nothing, when p.Owner does not hold the job RUNNING.
func (s *Store) CloseJobBatch(ctx context.Context, p CloseJobBatchParams) (*JobBatch, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("close job batch: limit %d must be positive", p.Limit)
	}
	b := &JobBatch{ClaimedAt: p.Now}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := holdJob(ctx, tx, p.JobID, p.Owner); err != nil {
			return err
		}
		pending, err := readPendingJobItems(ctx, tx, p.JobID, p.After, p.Limit, p.Now)
		if err != nil || len(pending) == 0 {
			return err
		}
		b.Last = pending[len(pending)-1].seq
		ids := make([]uuid.UUID, len(pending))
		for i, it := range pending {
			ids[i] = it.id
		}
		locked, err := lockForAction(ctx, tx, ids, p.Now)
		if err != nil {
			return err
		}
		byID := make(map[uuid.UUID]lockedFailure, len(locked))
		for _, f := range locked {
			byID[f.ID] = f
		}
		var (
			closable []uuid.UUID
			entries  []AuditEntry
			results  = make([]JobItemResult, len(pending))
		)
		for i, it := range pending {
			f, ok := byID[it.id]
			results[i].Seq = it.seq
			switch {
			case !ok:
				results[i].Outcome, results[i].Detail = JobItemSkipped, skipNotFound
			case !f.State.Closable():
				st := f.State
				results[i].Outcome, results[i].Detail = JobItemSkipped, skipDetail(it.id, &st, "close")
			case f.Leased:
				results[i].Outcome, results[i].Detail = JobItemSkipped, skipInProgress
			default:
				results[i].Outcome = JobItemDone
				closable = append(closable, it.id)
				details := map[string]any{"from_state": string(f.State)}
				for k, v := range p.Details {
					details[k] = v
				}
				id := it.id
				entries = append(entries, AuditEntry{FailureID: &id, Action: AuditActionClose, Principal: p.Principal,
					Reason: &p.Reason, Details: details, At: p.Now})
			}
		}
		if len(closable) > 0 {
			if _, err := tx.Exec(ctx, `
				UPDATE failure_states SET state = 'CLOSED', closed_reason = $2, closed_by = $3, closed_at = $4,
					updated_at = $4, next_attempt_at = NULL
				WHERE id = ANY($1) AND state IN ('RETRY_PENDING', 'PERMANENT')`,
				closable, p.Reason, p.Principal, p.Now); err != nil {
				return err
			}
		}
		b.Skipped = len(pending) - len(closable)
		if err := writeAudit(ctx, tx, entries); err != nil {
			return err
		}
		b.Job, err = recordJobOutcomes(ctx, tx, p.JobID, results, p.Now)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("close job batch: %w", err)
	}
	if b.Job == nil {
		job, err := s.JobByID(ctx, p.JobID)
		if err != nil {
			return nil, err
		}
		b.Job = job
	}
	return b, nil
}
