package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// CreateJobParams pins a job's selection: the open failures (RETRY_PENDING or PERMANENT) that
// Filter selects, oldest first, or IDs as given (duplicates once).
type CreateJobParams struct {
	Action string
	// TargetTopic is the topic of a resend_to job.
	TargetTopic *string
	Filter      *Filter
	IDs         []uuid.UUID
	Principal   string
	Reason      string
	// Selection describes the selection for display and audit.
	Selection map[string]any
	RateLimit float64
	// Token is the secret that starts the job; only its hash is stored.
	Token     []byte
	Now       time.Time
	ExpiresAt time.Time

	// TargetCluster is the cluster of a resend_to job; nil: each failure's own.
	TargetCluster *string
}

const jobColumns = `id, action, target_topic, state, principal, reason, selection, rate_limit, total, done, skipped, failed,
	cursor_seq, owner, lease_until, created_at, preview_expires_at, started_at, finished_at, updated_at, target_cluster`

func scanJob(row pgx.Row) (*Job, error) {
	var (
		j   Job
		sel []byte
	)
	err := row.Scan(&j.ID, &j.Action, &j.TargetTopic, &j.State, &j.Principal, &j.Reason, &sel, &j.RateLimit, &j.Total, &j.Done,
		&j.Skipped, &j.Failed, &j.CursorSeq, &j.Owner, &j.LeaseUntil, &j.CreatedAt, &j.PreviewExpiresAt,
		&j.StartedAt, &j.FinishedAt, &j.UpdatedAt, &j.TargetCluster)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(sel, &j.Selection); err != nil {
		return nil, fmt.Errorf("job selection: %w", err)
	}
	return &j, nil
}

// CreateJob pins the selection of p in a new job in state PREVIEW, in one transaction, and
// writes a "job_preview" audit entry. It returns a *FilterError for a filter that is not valid.
func (s *Store) CreateJob(ctx context.Context, p CreateJobParams) (*Job, error) {
	if p.Filter != nil {
		if err := p.Filter.Validate(); err != nil {
			return nil, err
		}
		if err := sqlFilter(p.Filter); err != nil {
			return nil, err
		}
	}
	sel, err := json.Marshal(p.Selection)
	if err != nil {
		return nil, fmt.Errorf("job selection: %w", err)
	}
	hash := sha256.Sum256(p.Token)
	var job *Job
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			id      uuid.UUID
			created time.Time
		)
		if err := tx.QueryRow(ctx, `
			INSERT INTO jobs (action, target_topic, state, principal, reason, selection, rate_limit, token_hash, total,
				created_at, preview_expires_at, updated_at, target_cluster)
			VALUES ($1, $9, 'PREVIEW', $2, nullif($3, ''), $4, $5, $6, 0, $7, $8, $7, $10) RETURNING id, created_at`,
			p.Action, p.Principal, p.Reason, sel, p.RateLimit, hash[:], p.Now, p.ExpiresAt, p.TargetTopic, p.TargetCluster).Scan(&id, &created); err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		// Each item with the job's created_at (its partition) and its failure's (where the
		// failure's record and state are).
		var tag int64
		if p.Filter != nil {
			args := sqlArgs{id, created}
			conds := append(conditions(p.Filter, &args), "f.state IN ('RETRY_PENDING', 'PERMANENT')")
			ct, err := tx.Exec(ctx, `
				INSERT INTO job_items (job_id, seq, failure_id, created_at, failure_created_at)
				SELECT $1, row_number() OVER (ORDER BY f.created_at, f.id), f.id, $2, f.created_at
				FROM failures f`+whereClause(conds), args...)
			if err != nil {
				return fmt.Errorf("pin job items: %w", err)
			}
			tag = ct.RowsAffected()
		} else {
			ct, err := tx.Exec(ctx, `
				INSERT INTO job_items (job_id, seq, failure_id, created_at, failure_created_at)
				SELECT $1, u.seq, u.id, $3, s.created_at FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, seq)
				LEFT JOIN LATERAL (SELECT s.created_at FROM failure_states s WHERE s.id = u.id LIMIT 1) s ON true`,
				id, DistinctIDs(p.IDs), created)
			if err != nil {
				return fmt.Errorf("pin job items: %w", err)
			}
			tag = ct.RowsAffected()
		}
		row := tx.QueryRow(ctx, `UPDATE jobs SET total = $2 WHERE id = $1 RETURNING `+jobColumns, id, tag)
		if job, err = scanJob(row); err != nil {
			return fmt.Errorf("count job items: %w", err)
		}
		return writeAudit(ctx, tx, []AuditEntry{jobAudit(job, AuditActionJobPreview, p.Principal, map[string]any{"total": tag})})
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// jobAudit returns an audit entry about job j. Job entries carry the job id in their details,
// and writeAudit puts it in the audit log's job_id column too.
func jobAudit(j *Job, action, principal string, details map[string]any) AuditEntry {
	d := map[string]any{"job_id": j.ID.String(), "job_action": j.Action, "selection": j.Selection}
	if j.TargetTopic != nil {
		d["target_topic"] = *j.TargetTopic
	}
	for k, v := range details {
		d[k] = v
	}
	return AuditEntry{Action: action, Principal: principal, Details: d}
}

// StartJob moves the job from PREVIEW to RUNNING when token matches its preview's (compared in
// constant time) and the preview has not expired at now. A wrong token or an expired preview
// wraps ErrTokenRefused; a job not in PREVIEW is a *JobStateError.
func (s *Store) StartJob(ctx context.Context, id uuid.UUID, token []byte, principal string, now time.Time) (*Job, error) {
	var job *Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			hash    []byte
			state   JobState
			expires time.Time
		)
		err := tx.QueryRow(ctx, `SELECT token_hash, state, preview_expires_at FROM jobs WHERE id = $1 FOR UPDATE`, id).
			Scan(&hash, &state, &expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("start job: %w", err)
		}
		got := sha256.Sum256(token)
		switch {
		case subtle.ConstantTimeCompare(got[:], hash) != 1:
			return fmt.Errorf("%w: the token is not this job's", ErrTokenRefused)
		case state != JobPreview:
			return &JobStateError{ID: id, State: state, Action: "start"}
		case !now.Before(expires):
			return fmt.Errorf("%w: the preview expired at %s: preview again", ErrTokenRefused, expires.UTC().Format(time.RFC3339))
		}
		row := tx.QueryRow(ctx, `
			UPDATE jobs SET state = CASE WHEN total = 0 THEN 'DONE' ELSE 'RUNNING' END, started_at = $2::timestamptz,
				finished_at = CASE WHEN total = 0 THEN $2::timestamptz END, updated_at = $2::timestamptz
			WHERE id = $1 RETURNING `+jobColumns, id, now)
		if job, err = scanJob(row); err != nil {
			return fmt.Errorf("start job: %w", err)
		}
		return writeAudit(ctx, tx, []AuditEntry{jobAudit(job, AuditActionJobStart, principal, nil)})
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// jobTransitions lists, for each operator operation on a job, the states it applies to and
// the state it leads to.
var jobTransitions = map[string]struct {
	from  []JobState
	to    JobState
	audit string
}{
	"pause":  {[]JobState{JobRunning}, JobPaused, AuditActionJobPause},
	"resume": {[]JobState{JobPaused}, JobRunning, AuditActionJobResume},
	"cancel": {[]JobState{JobPreview, JobRunning, JobPaused}, JobCanceled, AuditActionJobCancel},
}

// ChangeJobState pauses, resumes or cancels a job (op "pause", "resume" or "cancel") and
// audits it. A running job's instance notices within its heartbeat (package jobs). A state
// that does not allow op is a *JobStateError.
func (s *Store) ChangeJobState(ctx context.Context, id uuid.UUID, op, principal string, now time.Time) (*Job, error) {
	tr, ok := jobTransitions[op]
	if !ok {
		return nil, fmt.Errorf("change job state: unknown operation %q", op)
	}
	var job *Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var state JobState
		err := tx.QueryRow(ctx, `SELECT state FROM jobs WHERE id = $1 FOR UPDATE`, id).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("change job state: %w", err)
		}
		allowed := false
		for _, f := range tr.from {
			allowed = allowed || f == state
		}
		if !allowed {
			return &JobStateError{ID: id, State: state, Action: op}
		}
		row := tx.QueryRow(ctx, `
			UPDATE jobs SET state = $2::text, updated_at = $3::timestamptz, owner = NULL, lease_until = NULL,
				finished_at = CASE WHEN $2::text = 'CANCELED' THEN $3::timestamptz END
			WHERE id = $1 RETURNING `+jobColumns, id, tr.to, now)
		if job, err = scanJob(row); err != nil {
			return fmt.Errorf("change job state: %w", err)
		}
		return writeAudit(ctx, tx, []AuditEntry{jobAudit(job, tr.audit, principal, map[string]any{"from_state": string(state)})})
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// ClaimJob gives owner the oldest RUNNING job that no live lease holds, until leaseUntil, or
// returns nil when there is none. Instances claim with SKIP LOCKED, so no two hold one job.
func (s *Store) ClaimJob(ctx context.Context, owner string, now, leaseUntil time.Time) (*Job, error) {
	row := s.pool.QueryRow(ctx, `
		UPDATE jobs SET owner = $1, lease_until = $3
		WHERE id = (
			SELECT id FROM jobs
			WHERE state = 'RUNNING' AND (lease_until IS NULL OR lease_until <= $2)
			ORDER BY created_at, id
			FOR UPDATE SKIP LOCKED LIMIT 1)
		RETURNING `+jobColumns, owner, now, leaseUntil)
	j, err := scanJob(row)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim job: %w", err)
	}
	return j, nil
}

// JobItemResult is the outcome of one job item.
type JobItemResult struct {
	Seq     int64
	Outcome JobItemOutcome
	Detail  string
	// Audited says the item was acted on: it names its batch's audit entry.
	Audited bool
}

// FinishJobIfEmpty marks a RUNNING job held by owner DONE when none of its items lacks an
// outcome (a job whose last batch was recorded by an instance that then stopped).
func (s *Store) FinishJobIfEmpty(ctx context.Context, jobID uuid.UUID, owner string, now time.Time) error {
	_, err := s.pool.Exec(ctx, `
		UPDATE jobs SET state = 'DONE', finished_at = $3, updated_at = $3
		WHERE id = $1 AND owner = $2 AND state = 'RUNNING'
			AND NOT EXISTS (SELECT 1 FROM job_items WHERE job_id = $1 AND outcome IS NULL)`, jobID, owner, now)
	if err != nil {
		return fmt.Errorf("finish job: %w", err)
	}
	return nil
}

// ReleaseJob ends owner's lease on the job, so that another instance may claim it at once.
func (s *Store) ReleaseJob(ctx context.Context, jobID uuid.UUID, owner string) error {
	_, err := s.pool.Exec(ctx, `UPDATE jobs SET owner = NULL, lease_until = NULL WHERE id = $1 AND owner = $2`, jobID, owner)
	if err != nil {
		return fmt.Errorf("release job: %w", err)
	}
	return nil
}

// JobByID returns the job with id, or ErrNotFound.
func (s *Store) JobByID(ctx context.Context, id uuid.UUID) (*Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, id))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("job: %w", err)
	}
	return j, err
}

// ListJobs returns up to limit jobs, newest first, after the position when given, and whether
// more follow.
func (s *Store) ListJobs(ctx context.Context, after *JobPosition, limit int) ([]Job, bool, error) {
	args := []any{limit + 1}
	where := ""
	if after != nil {
		where = ` WHERE (created_at, id) < ($2, $3)`
		args = append(args, after.CreatedAt, after.ID)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+jobColumns+` FROM jobs`+where+` ORDER BY created_at DESC, id DESC LIMIT $1`, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) {
		j, err := scanJob(r)
		if err != nil {
			return Job{}, err
		}
		return *j, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list jobs: %w", err)
	}
	jobs, more := pageRows(jobs, limit)
	return jobs, more, nil
}

// JobItemsParams selects a page of a job's items.
type JobItemsParams struct {
	JobID uuid.UUID
	// Outcome keeps items with this outcome; "pending" keeps those without one; "" all.
	Outcome string
	// After starts after this sequence number.
	After int64
	Limit int
}

// JobItems returns a page of a job's items in order, and whether more follow.
func (s *Store) JobItems(ctx context.Context, p JobItemsParams) ([]JobItem, bool, error) {
	cond := ""
	switch p.Outcome {
	case "":
	case "pending":
		cond = " AND outcome IS NULL"
	default:
		cond = " AND outcome = $4"
	}
	args := []any{p.JobID, p.After, p.Limit + 1}
	if cond == " AND outcome = $4" {
		args = append(args, p.Outcome)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT seq, failure_id, coalesce(outcome, ''), detail, done_at FROM job_items
		WHERE job_id = $1 AND seq > $2`+cond+` ORDER BY seq LIMIT $3`, args...)
	if err != nil {
		return nil, false, fmt.Errorf("job items: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobItem, error) {
		var it JobItem
		return it, r.Scan(&it.Seq, &it.FailureID, &it.Outcome, &it.Detail, &it.DoneAt)
	})
	if err != nil {
		return nil, false, fmt.Errorf("job items: %w", err)
	}
	items, more := pageRows(items, p.Limit)
	return items, more, nil
}

// DeleteExpiredPreviews deletes the previews whose token expired before cutoff, with their
// items, and returns how many.
func (s *Store) DeleteExpiredPreviews(ctx context.Context, cutoff time.Time) (int64, error) {
	ct, err := s.pool.Exec(ctx, `DELETE FROM jobs WHERE state = 'PREVIEW' AND preview_expires_at < $1`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("delete expired previews: %w", err)
	}
	return ct.RowsAffected(), nil
}

// prefixed qualifies each column of a comma-separated list with prefix.
func prefixed(prefix, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// JobAuditPage returns the audit entries of a job after position after (from the first when
// nil), in the order they were written (time, then id, then item), at most limit, and whether
// the position of the next page (nil after the last): every entry of a job of any size, a page
// at a time. A batch's entry is returned once per item it acted on, as that failure's entry
// (batchItemDetailsSQL).
func (s *Store) JobAuditPage(ctx context.Context, jobID uuid.UUID, after *AuditPosition, limit int) ([]AuditEntry, *AuditPosition, error) {
	args := []any{jobID, limit + 1}
	where := ""
	if after != nil {
		// at >= $3 lets the job index (job_id, at, id) start at the page's end.
		where = ` AND a.at >= $3 AND (a.at, a.id) >= ($3, $4) AND (a.at, a.id, coalesce(i.seq, 0)) > ($3, $4, $5)`
		args = append(args, after.At, after.ID, after.Seq)
	}
	rows, err := s.pool.Query(ctx, jobAuditSQL+where+` ORDER BY a.at, a.id, coalesce(i.seq, 0) LIMIT $2`, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("job audit page: %w", err)
	}
	out, err := scanAuditSeq(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("job audit page: %w", err)
	}
	out, more := pageRows(out, limit)
	var next *AuditPosition
	if more && len(out) > 0 {
		last := out[len(out)-1]
		next = &AuditPosition{At: last.At, ID: last.ID, Seq: last.seq}
	}
	return stripSeq(out), next, nil
}

// batchItemDetailsSQL is the details of the entry of item i of the batch whose audit entry is
// a: the batch's details without its counts, with what the batch adds for the item's outcome,
// and a failed item's error.
const batchItemDetailsSQL = `(a.details - 'batch') || coalesce(a.details->'batch'->'item'->i.outcome, '{}'::jsonb)
	|| CASE WHEN i.outcome = 'failed' AND i.detail IS NOT NULL THEN jsonb_build_object('error', i.detail) ELSE '{}'::jsonb END`

// isBatchSQL is true for the audit entry a of a job's batch.
const isBatchSQL = `(a.failure_id IS NULL AND a.details ? 'batch')`

// jobAuditSQL selects the audit entries of the job $1 (the job's own, each of its batches'
// items, and entries of single failures that name the job), with the item's sequence number
// (0 for entries that are not a batch's), as a, i.
const jobAuditSQL = `
	SELECT a.id, coalesce(i.failure_id, a.failure_id), a.group_id, a.action, a.principal, a.reason,
		CASE WHEN i.seq IS NULL THEN a.details ELSE ` + batchItemDetailsSQL + ` END, a.at, coalesce(i.seq, 0)
	FROM audit_log a
	LEFT JOIN LATERAL (
		SELECT i.seq, i.failure_id, i.outcome, i.detail FROM job_items i
		WHERE ` + isBatchSQL + ` AND i.job_id = a.job_id
			AND i.seq BETWEEN (a.details->'batch'->>'first_seq')::bigint AND (a.details->'batch'->>'last_seq')::bigint
			AND i.audit_id = a.id) i ON true
	WHERE a.job_id = $1`

// auditWithSeq is an audit entry with the sequence number of its job item (0 for none).
type auditWithSeq struct {
	AuditEntry
	seq int64
}

func scanAuditSeq(rows pgx.Rows) ([]auditWithSeq, error) {
	defer rows.Close()
	out := []auditWithSeq{}
	for rows.Next() {
		var (
			e       auditWithSeq
			details []byte
		)
		if err := rows.Scan(&e.ID, &e.FailureID, &e.GroupID, &e.Action, &e.Principal, &e.Reason, &details, &e.At, &e.seq); err != nil {
			return nil, err
		}
		if details != nil {
			if err := json.Unmarshal(details, &e.Details); err != nil {
				return nil, fmt.Errorf("audit entry %d details: %w", e.ID, err)
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func stripSeq(in []auditWithSeq) []AuditEntry {
	out := make([]AuditEntry, len(in))
	for i := range in {
		out[i] = in[i].AuditEntry
	}
	return out
}

// pageRows cuts rows, read with a limit of limit+1, to a page of limit, and reports whether
// there are more.
func pageRows[T any](rows []T, limit int) ([]T, bool) {
	if len(rows) > limit {
		return rows[:limit], true
	}
	return rows, false
}

// JobAudit returns the audit entries of a job, at most limit: its own (preview, start, pause,
// resume, cancel: no failure id) first, so that a large job's items never push them out, then
// its items' (each batch's entry once per item it acted on, as that failure's entry), each
// part oldest first.
func (s *Store) JobAudit(ctx context.Context, jobID uuid.UUID, limit int) ([]AuditEntry, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, failure_id, group_id, action, principal, reason, details, at FROM audit_log a
		WHERE a.job_id = $1 AND a.failure_id IS NULL AND NOT `+isBatchSQL+`
		ORDER BY at, id LIMIT $2`, jobID, limit)
	if err != nil {
		return nil, fmt.Errorf("job audit: %w", err)
	}
	out, err := scanAudit(rows)
	if err != nil {
		return nil, fmt.Errorf("job audit: %w", err)
	}
	if len(out) >= limit {
		return out, nil
	}
	rows, err = s.pool.Query(ctx, jobAuditSQL+` AND (a.failure_id IS NOT NULL OR `+isBatchSQL+`)
		ORDER BY a.at, a.id, coalesce(i.seq, 0) LIMIT $2`, jobID, limit-len(out))
	if err != nil {
		return nil, fmt.Errorf("job audit: %w", err)
	}
	items, err := scanAuditSeq(rows)
	if err != nil {
		return nil, fmt.Errorf("job audit: %w", err)
	}
	return append(out, stripSeq(items)...), nil
}
