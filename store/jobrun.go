package store

import (
	"context"
	"encoding/json"
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
//     unacknowledged sends, writes the batch's one audit entry, and records every item's
//     outcome (naming that entry) with the job's counts, in one transaction: the outcome of a
//     resend is recorded with its mark.
//
// A batch writes one audit entry, not one per item: the items it acted on name it
// (job_items.audit_id), and FailureAudit, JobAudit and JobAuditPage show it, for each of
// them, as an entry of that failure (batchItemAuditSQL).
//
// A job that resumes after a crash finds its own unsettled claims (JobClaims) and settles
// them; no other resend ever takes their failures meanwhile. A close job's batch is one
// transaction (CloseJobBatch).

// JobBatchItem is one claimed item of a job's batch.
type JobBatchItem struct {
	Seq       int64
	FailureID uuid.UUID
	// CreatedAt is the failure's created_at as pinned by the preview; zero when not known (a
	// claim read back by JobClaims).
	CreatedAt time.Time
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
// the failure does not exist) and whether a live claim holds it at $4. $5 is the job's
// created_at: only the job's partition of job_items is read, and each failure's state is looked
// up by (id, created_at) in its own partition.
const pendingJobItemsSQL = `
	SELECT i.seq, i.failure_id, i.failure_created_at, f.state,
		coalesce(f.id IN (` + `SELECT unnest(c.failure_ids) FROM resend_claims c WHERE c.lease_until > $4` + `), false)
	FROM job_items i LEFT JOIN failure_states f ON f.id = i.failure_id AND f.created_at = i.failure_created_at
	WHERE i.job_id = $1 AND i.created_at = $5 AND i.seq > $2 AND i.outcome IS NULL
		AND i.seq NOT IN (SELECT unnest(c.job_seqs) FROM resend_claims c WHERE c.job_id = $1)
	ORDER BY i.seq LIMIT $3`

type pendingJobItem struct {
	seq       int64
	id        uuid.UUID
	createdAt *time.Time
	state     *State
	leased    bool
}

func readPendingJobItems(ctx context.Context, tx pgx.Tx, jobID uuid.UUID, jobCreated time.Time, after int64, limit int, now time.Time) ([]pendingJobItem, error) {
	rows, err := tx.Query(ctx, pendingJobItemsSQL, jobID, after, limit, now, jobCreated)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (pendingJobItem, error) {
		var (
			it pendingJobItem
			id [16]byte // not uuid.UUID: see uuids.go
		)
		err := r.Scan(&it.seq, &id, &it.createdAt, &it.state, &it.leased)
		it.id = id
		return it, err
	})
}

// holdJob fails with ErrLeaseLost unless owner holds the job RUNNING, and returns the job's
// created_at (the partition of its items). It does not lock the job's row, which the settles
// of the job's other batches update meanwhile: a pause or cancel that commits just after the
// check lets this one batch go on, as one already sending does.
func holdJob(ctx context.Context, tx pgx.Tx, jobID uuid.UUID, owner string) (time.Time, error) {
	var (
		held    bool
		created time.Time
	)
	err := tx.QueryRow(ctx, `SELECT state = 'RUNNING' AND owner IS NOT DISTINCT FROM $2, created_at FROM jobs WHERE id = $1`,
		jobID, owner).Scan(&held, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return created, ErrNotFound
	}
	if err != nil {
		return created, err
	}
	if !held {
		return created, ErrLeaseLost
	}
	return created, nil
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
		created, err := holdJob(ctx, tx, p.JobID, p.Owner)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		// The claim lock after the job's row: nothing takes them in the other order.
		if _, err := tx.Exec(ctx, lockClaimsSQL); err != nil {
			return err
		}
		pending, err := readPendingJobItems(ctx, tx, p.JobID, created, p.After, p.Limit, p.Now)
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
				item := JobBatchItem{Seq: it.seq, FailureID: it.id}
				if it.createdAt != nil {
					item.CreatedAt = *it.createdAt
				}
				b.Items = append(b.Items, item)
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
		b.Job, err = recordJobOutcomes(ctx, tx, jobOutcomes{jobID: p.JobID, jobCreated: &created, results: skipped, at: p.Now})
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

// jobOutcomes are the parameters of recordJobOutcomes.
type jobOutcomes struct {
	jobID uuid.UUID
	// jobCreated is the job's created_at (the partition of its items); nil reads it.
	jobCreated *time.Time
	results    []JobItemResult
	at         time.Time
	// auditID, when not 0, is the batch's audit entry (written at at): the results with
	// Audited name it.
	auditID int64
}

// recordJobOutcomes records the outcomes of items of a job that have none yet, adds them to
// the job's counts, and makes a RUNNING or PAUSED job whose items all have their outcome DONE,
// in one statement. It returns the job.
func recordJobOutcomes(ctx context.Context, tx pgx.Tx, o jobOutcomes) (*Job, error) {
	if len(o.results) == 0 {
		return scanJob(tx.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, o.jobID))
	}
	seqs := make([]int64, len(o.results))
	outcomes := make([]string, len(o.results))
	details := make([]*string, len(o.results))
	audited := make([]bool, len(o.results))
	first, last := o.results[0].Seq, o.results[0].Seq
	for i, r := range o.results {
		seqs[i], outcomes[i], audited[i] = r.Seq, string(r.Outcome), r.Audited && o.auditID != 0
		if r.Detail != "" {
			d := r.Detail
			details[i] = &d
		}
		first, last = min(first, r.Seq), max(last, r.Seq)
	}
	var auditID *int64
	if o.auditID != 0 {
		auditID = &o.auditID
	}
	// The job's created_at as a value when known, so that the plan reads only its partition.
	created := `(SELECT created_at FROM jobs WHERE id = $1)`
	args := []any{o.jobID, seqs, outcomes, details, o.at, first, last, audited, auditID}
	if o.jobCreated != nil {
		created, args = `$10`, append(args, *o.jobCreated)
	}
	row := tx.QueryRow(ctx, `
		WITH r AS (
			SELECT * FROM unnest($2::bigint[], $3::text[], $4::text[], $8::boolean[]) AS r(seq, outcome, detail, audited)),
		u AS (
			UPDATE job_items i SET outcome = r.outcome, detail = r.detail, done_at = $5::timestamptz,
				audit_id = CASE WHEN r.audited THEN $9::bigint END
			FROM r WHERE i.job_id = $1 AND i.created_at = `+created+` AND i.seq BETWEEN $6 AND $7 AND i.seq = r.seq
				AND i.outcome IS NULL
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
		RETURNING `+prefixed("j.", jobColumns), args...)
	return scanJob(row)
}

// writeBatchAudit writes the one audit entry of a job's batch and returns its id: e with the
// batch's counts in details["batch"] (items, first and last sequence numbers, and per outcome
// what its items' entries add to the details: item). FailureAudit, JobAudit and JobAuditPage
// show the entry once per item that names it, as that failure's entry (batchItemAuditSQL).
func writeBatchAudit(ctx context.Context, tx pgx.Tx, e AuditEntry, results []JobItemResult, item map[JobItemOutcome]map[string]any) (int64, error) {
	var (
		n           int
		first, last int64
		counts      = map[string]int{}
	)
	for _, r := range results {
		if !r.Audited {
			continue
		}
		if n == 0 || r.Seq < first {
			first = r.Seq
		}
		last = max(last, r.Seq)
		n++
		counts[string(r.Outcome)]++
	}
	if n == 0 {
		return 0, nil
	}
	details := make(map[string]any, len(e.Details)+1)
	for k, v := range e.Details {
		details[k] = v
	}
	batch := map[string]any{"items": n, "first_seq": first, "last_seq": last, "outcomes": counts}
	if len(item) > 0 {
		batch["item"] = item
	}
	details["batch"] = batch
	b, err := json.Marshal(details)
	if err != nil {
		return 0, fmt.Errorf("audit details: %w", err)
	}
	var id int64
	err = tx.QueryRow(ctx, `
		INSERT INTO audit_log (failure_id, group_id, action, principal, reason, details, at, job_id)
		VALUES (NULL, $1, $2, $3, $4, $5::jsonb, $6, $7) RETURNING id`,
		e.GroupID, e.Action, e.Principal, e.Reason, string(b), e.At, entryJob(&AuditEntry{Details: details})).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("write batch audit: %w", err)
	}
	return id, nil
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
	JobID uuid.UUID
	// JobCreatedAt is the job's created_at (Job.CreatedAt): only the job's partition of the job
	// items is planned for. Zero reads it.
	JobCreatedAt time.Time
	ClaimID      int64
	// Sends are the outcomes of the claim's items; an item of the claim without one (not
	// attempted) stays pending and is claimed again later.
	Sends []JobSend
	At    time.Time
	// Audit, when not nil, is the batch's audit entry (its details name the job): it is written
	// once, in the same transaction, at At, and each item that was sent names it. Item adds, for
	// the items of each outcome, these details to the entry that FailureAudit shows for them.
	Audit *AuditEntry
	Item  map[JobItemOutcome]map[string]any
}

// SettleJobClaim records the outcome of a job's claim in one transaction: it deletes the
// claim, marks the acknowledged failures RESENT, records the unacknowledged sends on their
// failures, records each item's outcome (an acknowledged item is done even when its failure
// had changed state and was not marked: its record was republished) with the job's counts,
// and writes the batch's audit entry, which every item that was sent names. It records outcomes whatever the job's state: the sends
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
			res := JobItemResult{Seq: r.Seq, Audited: r.Skipped == ""}
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
		var auditID int64
		if p.Audit != nil {
			e := *p.Audit
			e.At = p.At
			if auditID, err = writeBatchAudit(ctx, tx, e, results, p.Item); err != nil {
				return err
			}
		}
		// Last: the job's row stays locked until the commit, and the job's other batches
		// settle into it too.
		o := jobOutcomes{jobID: p.JobID, results: results, at: p.At, auditID: auditID}
		if !p.JobCreatedAt.IsZero() {
			o.jobCreated = &p.JobCreatedAt
		}
		job, err = recordJobOutcomes(ctx, tx, o)
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
	// Details are the details of the batch's audit entry (they name the job).
	Details map[string]any
	Now     time.Time
}

// CloseJobBatch closes the next items of a close job held by p.Owner and records their
// outcomes, in one transaction: up to p.Limit items after p.After without an outcome; a
// failure that is RETRY_PENDING or PERMANENT and held by no resend becomes CLOSED (done), the
// others are skipped with the reason; the batch writes one audit entry, which the closed items
// name. It returns the batch (without claim)
// and ErrLeaseLost, doing nothing, when p.Owner does not hold the job RUNNING.
func (s *Store) CloseJobBatch(ctx context.Context, p CloseJobBatchParams) (*JobBatch, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("close job batch: limit %d must be positive", p.Limit)
	}
	b := &JobBatch{ClaimedAt: p.Now}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		created, err := holdJob(ctx, tx, p.JobID, p.Owner)
		if err != nil {
			return err
		}
		pending, err := readPendingJobItems(ctx, tx, p.JobID, created, p.After, p.Limit, p.Now)
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
				results[i].Outcome, results[i].Audited = JobItemDone, true
				closable = append(closable, it.id)
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
		auditID, err := writeBatchAudit(ctx, tx, AuditEntry{Action: AuditActionClose, Principal: p.Principal, Reason: &p.Reason,
			Details: p.Details, At: p.Now}, results, nil)
		if err != nil {
			return err
		}
		b.Job, err = recordJobOutcomes(ctx, tx, jobOutcomes{jobID: p.JobID, jobCreated: &created, results: results, at: p.Now, auditID: auditID})
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
