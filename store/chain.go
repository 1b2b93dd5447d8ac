package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/avro"
)

// ParkedChain returns the ordering-guard chain of the failure with id, or ErrNotFound. A
// failure with a null key is in no chain.
//
// The chain is read by the stored links (failure_links, written by the intake from each
// parked failure's MPFE): each causing message is one member, placed at its first failure's
// offset and described by its latest failure. A member whose latest failure is linked to a
// head is parked behind that head; any other member is a head. So a parked record whose
// release resend failed for its own reason is the head of those parked behind it since.
func (s *Store) ParkedChain(ctx context.Context, id uuid.UUID) (ParkedChain, error) {
	var causing string
	var nullKey bool
	err := s.pool.QueryRow(ctx, `SELECT causing_message, original_key IS NULL FROM failures WHERE id = $1`, id).
		Scan(&causing, &nullKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return ParkedChain{}, fmt.Errorf("parked chain: %w", ErrNotFound)
	}
	if err != nil {
		return ParkedChain{}, fmt.Errorf("parked chain: %w", err)
	}
	if nullKey {
		return ParkedChain{}, nil // a null key is not guarded: no chain
	}
	self, headRef, ok, err := s.chainMember(ctx, causing)
	if err != nil || !ok {
		return ParkedChain{}, err
	}
	var chain ParkedChain
	head := &self
	if headRef != "" {
		h, _, found, err := s.chainMember(ctx, headRef)
		if err != nil {
			return ParkedChain{}, err
		}
		head = nil
		if found {
			head = &h
		}
	} else {
		headRef = causing
	}
	chain.HeadRef = headRef
	if chain.Parked, chain.Truncated, err = s.chainMembers(ctx, headRef, false, MaxParkedChain); err != nil {
		return ParkedChain{}, err
	}
	if head != nil && (len(chain.Parked) > 0 || head.ID != self.ID) {
		chain.Head = head
	}
	if chain.Head == nil && len(chain.Parked) == 0 {
		chain.HeadRef = ""
	}
	return chain, nil
}

// chainMember returns the latest failure of the causing message, and the head it is linked
// to ("" when its latest failure is not parked); ok is false when no failure has it.
func (s *Store) chainMember(ctx context.Context, causing string) (l ParkedLink, head string, ok bool, err error) {
	var h *string
	err = s.pool.QueryRow(ctx, `
		SELECT f.id, f.state, f.error_code, l.head,
			(SELECT o.original_offset FROM failures o WHERE o.causing_message = f.causing_message ORDER BY o.attempt LIMIT 1)
		FROM failures f LEFT JOIN failure_links l ON l.failure_id = f.id
		WHERE f.causing_message = $1
		ORDER BY f.attempt DESC, f.created_at DESC LIMIT 1`, causing).Scan(&l.ID, &l.State, &l.ErrorCode, &h, &l.Offset)
	if errors.Is(err, pgx.ErrNoRows) {
		return ParkedLink{}, "", false, nil
	}
	if err != nil {
		return ParkedLink{}, "", false, fmt.Errorf("parked chain: %w", err)
	}
	l.CausingMessage = causing
	if h != nil {
		head = *h
	}
	return l, head, true, nil
}

// chainMembers returns, in offset order, the members parked behind head (a causing message or
// an overflow marker): the causing messages whose latest failure is linked to it; with open,
// only those still RETRY_PENDING or PERMANENT. At most limit; truncated says there were more.
func (s *Store) chainMembers(ctx context.Context, head string, open bool, limit int) ([]ParkedLink, bool, error) {
	rows, err := s.pool.Query(ctx, `
		WITH linked AS (
			SELECT DISTINCT f.causing_message
			FROM failure_links l JOIN failures f ON f.id = l.failure_id AND f.created_at = l.created_at
			WHERE l.head = $1),
		latest AS (
			SELECT DISTINCT ON (f.causing_message) f.id, f.created_at, f.causing_message, f.state, f.error_code
			FROM failures f JOIN linked USING (causing_message)
			ORDER BY f.causing_message, f.attempt DESC, f.created_at DESC)
		SELECT m.id, m.causing_message, m.state, m.error_code,
			(SELECT o.original_offset FROM failures o WHERE o.causing_message = m.causing_message ORDER BY o.attempt LIMIT 1) AS first_offset
		FROM latest m JOIN failure_links l ON l.failure_id = m.id AND l.head = $1
		WHERE NOT $2 OR m.state IN ('RETRY_PENDING', 'PERMANENT')
		ORDER BY first_offset, m.id
		LIMIT $3`, head, open, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("parked chain: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ParkedLink, error) {
		var l ParkedLink
		err := r.Scan(&l.ID, &l.CausingMessage, &l.State, &l.ErrorCode, &l.Offset)
		return l, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("parked chain: %w", err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// OpenFollowers returns the failures parked behind head (a causing message, failure_links.head)
// that an action may still resend, in offset order, at most limit.
func (s *Store) OpenFollowers(ctx context.Context, head string, limit int) ([]ParkedLink, error) {
	out, _, err := s.chainMembers(ctx, head, true, limit)
	return out, err
}

// ChainHeads are the failures whose chains WithParkedFollowers and ChainCandidates look up.
type ChainHeads struct {
	// IDs are the failures, in the order of the action.
	IDs []uuid.UUID
	// CreatedAt, when not nil, holds the created_at of each of IDs (ResendItem.CreatedAt):
	// each record is then read by its primary key in its own partition instead of being
	// looked up by id in every partition.
	CreatedAt []time.Time
	// Causing, when not nil, holds the causing message of each of IDs
	// (ResendItem.CausingMessage, which never changes): no record is read at all. The caller
	// vouches for the failures (it has just acted on them).
	Causing []string
}

// WithParkedFollowers returns those of h.IDs whose causing message has open failures linked to
// it as their head (failure_links): the failures whose resend releases a chain. It is one
// query for all ids, so that a batch of resends without chains pays little for the check.
// The order of h.IDs is kept.
func (s *Store) WithParkedFollowers(ctx context.Context, h ChainHeads) ([]uuid.UUID, error) {
	return s.chainCandidates(ctx, h, false)
}

// ChainCandidates returns those of h.IDs that WithParkedFollowers returns and those that are
// parked themselves (a parked failure resent behind a closed head releases those after it):
// the failures whose action may release a chain. The order of h.IDs is kept.
func (s *Store) ChainCandidates(ctx context.Context, h ChainHeads) ([]uuid.UUID, error) {
	return s.chainCandidates(ctx, h, true)
}

// chainCandidatesSQL finds the candidates among the failures u(id) of its FROM clause (the
// first verb), whose causing message is the second verb. Each check is a probe of one index,
// taken row by row (LATERAL … LIMIT 1 keeps the planner from hashing every link with every
// record, as it did for an EXISTS beside an OR): failure_links_head_idx by the failure's
// causing message, then the follower's state by its primary key; and, when $2,
// failure_links_pkey by the failure's id. Almost no failure heads a chain, so almost every
// probe finds nothing in the first index. A record is read by (created_at, id), its primary
// key: the id alone is not a prefix of any index of the records.
const chainCandidatesSQL = `
		SELECT u.id
		FROM %s
		LEFT JOIN LATERAL (
			SELECT 1 AS one FROM failure_links l
			JOIN failure_states f ON f.id = l.failure_id AND f.created_at = l.created_at
			WHERE l.head = %s AND f.state IN ('RETRY_PENDING', 'PERMANENT')
			LIMIT 1) follower ON true
		LEFT JOIN LATERAL (
			SELECT 1 AS one FROM failure_links l WHERE $2 AND l.failure_id = u.id LIMIT 1) parked ON true
		WHERE (follower.one IS NOT NULL OR parked.one IS NOT NULL)`

func (s *Store) chainCandidates(ctx context.Context, h ChainHeads, parked bool) ([]uuid.UUID, error) {
	ids := h.IDs
	if len(ids) == 0 {
		return nil, nil
	}
	if (h.CreatedAt != nil && len(h.CreatedAt) != len(ids)) || (h.Causing != nil && len(h.Causing) != len(ids)) {
		return nil, fmt.Errorf("parked followers: %d ids, %d created_at, %d causing messages", len(ids), len(h.CreatedAt), len(h.Causing))
	}
	var (
		query string
		args  = []any{uuidArray(ids), parked}
	)
	switch {
	case h.Causing != nil:
		query = fmt.Sprintf(chainCandidatesSQL, `unnest($1::uuid[], $3::text[]) AS u(id, causing)`, `u.causing`)
		args = append(args, h.Causing)
	case h.CreatedAt != nil:
		query = fmt.Sprintf(chainCandidatesSQL, `unnest($1::uuid[], $3::timestamptz[]) AS u(id, created_at)
		JOIN failure_records r ON r.created_at = u.created_at AND r.id = u.id`, `r.causing_message`)
		args = append(args, h.CreatedAt)
	default:
		// The created_at of each id from the states' primary key (id, created_at).
		query = fmt.Sprintf(chainCandidatesSQL, `failure_states u
		JOIN failure_records r ON r.created_at = u.created_at AND r.id = u.id`, `r.causing_message`) + ` AND u.id = ANY($1::uuid[])`
	}
	// No JIT: with every partition of the states in each probe's plan, the estimated cost of a
	// plan for a batch's parameters passes jit_above_cost, and compiling it (about 100 ms over
	// 32 partitions) costs a hundred times more than running it. One round trip.
	var found [][16]byte
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL jit = off")
	b.Queue(query, args...).Query(func(rows pgx.Rows) error {
		var err error
		found, err = pgx.CollectRows(rows, pgx.RowTo[[16]byte])
		return err
	})
	b.Queue("COMMIT")
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("parked followers: %w", err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	has := make(map[uuid.UUID]bool, len(found))
	for _, id := range found {
		has[id] = true
	}
	out := make([]uuid.UUID, 0, len(found))
	for _, id := range ids {
		if has[id] {
			out = append(out, id)
			delete(has, id)
		}
	}
	return out, nil
}

// parkedHead returns the head reference an MPFE of a parked record carries (the metadata map
// entries avro.ParkedHeadEntry and avro.ParkedBehindEntry); ok is false for any other event.
func parkedHead(e *avro.Event) (head, headEvent string, ok bool) {
	if e.References.ErrorType.Code != avro.CodeParkedBehind {
		return "", "", false
	}
	md := e.Payload.FailedMessageMetadata
	if md == nil || len(md.Headers[avro.ParkedHeadEntry]) == 0 {
		return "", "", false
	}
	return string(md.Headers[avro.ParkedHeadEntry]), string(md.Headers[avro.ParkedBehindEntry]), true
}

// writeLinks stores, in the intake's transaction, the head reference of each fresh row that
// is a parked record's MPFE (failure_links).
func writeLinks(ctx context.Context, tx pgx.Tx, rows []ingestRow, fresh []int, outcomes []IngestOutcome, now time.Time) error {
	var (
		ids   []uuid.UUID
		heads []string
		evs   []*string
	)
	for _, i := range fresh {
		head, ev, ok := parkedHead(rows[i].in.Event)
		if !ok {
			continue
		}
		ids, heads = append(ids, outcomes[i].ID), append(heads, head)
		if ev == "" {
			evs = append(evs, nil)
		} else {
			evs = append(evs, &ev)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO failure_links (failure_id, created_at, head, head_event)
		SELECT * FROM unnest($1::uuid[], array_fill($2::timestamptz, ARRAY[cardinality($1::uuid[])]), $3::text[], $4::text[])`,
		ids, now, heads, evs); err != nil {
		return fmt.Errorf("insert failure links: %w", err)
	}
	return nil
}

// ChainRelease is a release of an ordering chain in progress (chain_releases): the open
// failures parked behind a resolved head are resent in offset order.
type ChainRelease struct {
	ID uuid.UUID
	// HeadID is the head failure acted on; Head its causing message (failure_links.head).
	HeadID uuid.UUID
	Head   string
	// Release says each resend carries avro.HeaderRelease = Head (the head was closed).
	Release bool
	// AfterOffset, when set, limits the followers to those parked at a later offset (a parked
	// failure resent behind a closed head releases those after it).
	AfterOffset *int64
	Principal   string
	Reason      string
	// Trigger is "auto" (the scheduler) or "manual".
	Trigger string
	Details map[string]any
	// JobID names the retry job the followers are items of; nil otherwise.
	JobID      *uuid.UUID
	Owner      string
	LeaseUntil time.Time
	CreatedAt  time.Time
}

const chainReleaseColumns = `c.id, c.head_id, c.head, c.release, c.after_offset, c.principal, coalesce(c.reason, ''), c.trigger, c.details, c.job_id, c.owner, c.lease_until, c.created_at`

func scanChainRelease(r pgx.Row) (ChainRelease, error) {
	var c ChainRelease
	var details []byte
	err := r.Scan(&c.ID, &c.HeadID, &c.Head, &c.Release, &c.AfterOffset, &c.Principal, &c.Reason, &c.Trigger, &details, &c.JobID, &c.Owner, &c.LeaseUntil, &c.CreatedAt)
	if err == nil && len(details) > 0 {
		err = json.Unmarshal(details, &c.Details)
	}
	return c, err
}

// StartChainRelease records c (its ID, Owner, LeaseUntil and CreatedAt set by the caller)
// before the first of its followers is sent. With c.JobID the followers count in the job's
// total from now on, so that the job is not DONE before their outcomes are recorded
// (AddChainJobItems).
func (s *Store) StartChainRelease(ctx context.Context, c ChainRelease, followers int) error {
	details := []byte("{}")
	if c.Details != nil {
		var err error
		if details, err = json.Marshal(c.Details); err != nil {
			return fmt.Errorf("chain release details: %w", err)
		}
	}
	reserved := 0
	if c.JobID != nil {
		reserved = followers
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if reserved > 0 {
			if _, err := tx.Exec(ctx, `UPDATE jobs SET total = total + $2 WHERE id = $1`, *c.JobID, reserved); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO chain_releases (id, head_id, head, release, principal, reason, trigger, details, job_id, owner, lease_until,
				created_at, after_offset, job_reserved)
			VALUES ($1, $2, $3, $4, $5, nullif($6, ''), $7, $8, $9, $10, $11, $12, $13, $14)`,
			c.ID, c.HeadID, c.Head, c.Release, c.Principal, c.Reason, c.Trigger, details, c.JobID, c.Owner, c.LeaseUntil,
			c.CreatedAt, c.AfterOffset, reserved)
		return err
	})
	if err != nil {
		return fmt.Errorf("start chain release: %w", err)
	}
	return nil
}

// RenewChainRelease extends owner's lease on the release with id. It returns ErrLeaseLost
// when the release is no longer owner's (taken over after its lease, or finished).
func (s *Store) RenewChainRelease(ctx context.Context, id uuid.UUID, owner string, until time.Time) error {
	ct, err := s.pool.Exec(ctx, `UPDATE chain_releases SET lease_until = $3 WHERE id = $1 AND owner = $2`, id, owner, until)
	if err != nil {
		return fmt.Errorf("renew chain release: %w", err)
	}
	if ct.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

// EndChainRelease deletes owner's release with id: every follower has its outcome. The
// followers its job's total counted whose item was not recorded (no longer parked behind the
// head when the release was finished) leave the total, and the job is DONE when every item has
// its outcome.
func (s *Store) EndChainRelease(ctx context.Context, id uuid.UUID, owner string, at time.Time) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var job *uuid.UUID
		var reserved int
		err := tx.QueryRow(ctx, `DELETE FROM chain_releases WHERE id = $1 AND owner = $2 RETURNING job_id, job_reserved`, id, owner).Scan(&job, &reserved)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil || job == nil || reserved == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE jobs SET total = total - $2, updated_at = $3`+
			jobDoneSet("done + skipped + failed", "total - $2", "$3")+` WHERE id = $1`, *job, reserved, at)
		return err
	})
	if err != nil {
		return fmt.Errorf("end chain release: %w", err)
	}
	return nil
}

// jobDoneSet returns the SET clauses that make a RUNNING or PAUSED job DONE once every item
// has its outcome, for an UPDATE of jobs that sets its outcome count to outcomes and its total
// to total (SQL expressions over the old row); at is the time's placeholder.
func jobDoneSet(outcomes, total, at string) string {
	full := "state IN ('RUNNING', 'PAUSED') AND " + outcomes + " >= " + total
	return `,
	state = CASE WHEN ` + full + ` THEN 'DONE' ELSE state END,
	finished_at = CASE WHEN ` + full + ` THEN ` + at + `::timestamptz ELSE finished_at END`
}

// ClaimChainReleases takes over, for owner until leaseUntil, up to limit releases whose lease
// ended before now (their owner stopped mid-release), oldest first (SKIP LOCKED: instances
// claim different ones).
func (s *Store) ClaimChainReleases(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]ChainRelease, error) {
	rows, err := s.pool.Query(ctx, `
		UPDATE chain_releases c SET owner = $1, lease_until = $3
		FROM (SELECT id FROM chain_releases WHERE lease_until < $2 ORDER BY created_at, id LIMIT $4 FOR UPDATE SKIP LOCKED) d
		WHERE c.id = d.id
		RETURNING `+chainReleaseColumns, owner, now, leaseUntil, limit)
	if err != nil {
		return nil, fmt.Errorf("claim chain releases: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ChainRelease, error) { return scanChainRelease(r) })
	if err != nil {
		return nil, fmt.Errorf("claim chain releases: %w", err)
	}
	return out, nil
}

// MarkArrivedResent marks the failure with id RESENT, with entry in the audit log, when it is
// still RETRY_PENDING or PERMANENT: its resend reached the broker, but the resender that sent
// it stopped before it recorded so. It reports whether the failure was marked.
func (s *Store) MarkArrivedResent(ctx context.Context, id uuid.UUID, at time.Time, entry AuditEntry) (bool, error) {
	var marked bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ct, err := tx.Exec(ctx, `
			UPDATE failure_states SET state = 'RESENT', resent_at = $2, updated_at = $2
			WHERE id = $1 AND state IN ('RETRY_PENDING', 'PERMANENT')`, id, at)
		if err != nil {
			return err
		}
		if marked = ct.RowsAffected() == 1; !marked {
			return nil
		}
		if entry.At.IsZero() {
			entry.At = at
		}
		return writeAudit(ctx, tx, []AuditEntry{entry})
	})
	if err != nil {
		return false, fmt.Errorf("mark arrived resent: %w", err)
	}
	return marked, nil
}

// ChainJobItem is the outcome of one failure parked behind a head that a retry job resent:
// an item of the job, added after the job's pinned items.
type ChainJobItem struct {
	FailureID uuid.UUID
	// Outcome is JobItemDone, JobItemSkipped or JobItemFailed.
	Outcome JobItemOutcome
	Detail  string
}

// AddChainJobItems records items, followers that the release with releaseID sent for the
// job with jobID, as items of the job with their outcomes, after its last item, and counts
// them, in one transaction: a follower is one item of the job, counted exactly once. A
// failure that is an item of the job already (pinned with its head, or recorded before) is
// not added again and counts nothing. The followers the release counted in the job's total
// (StartChainRelease) are taken from it; any beyond are added to the total. The job is DONE
// once every item has its outcome. It returns how many items were added.
func (s *Store) AddChainJobItems(ctx context.Context, releaseID, jobID uuid.UUID, items []ChainJobItem, at time.Time) (int, error) {
	if len(items) == 0 {
		return 0, nil
	}
	ids := make([]uuid.UUID, len(items))
	outcomes := make([]string, len(items))
	details := make([]*string, len(items))
	for i, it := range items {
		ids[i], outcomes[i] = it.FailureID, string(it.Outcome)
		if it.Detail != "" {
			d := it.Detail
			details[i] = &d
		}
	}
	var added int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The job's row lock orders this with the job's other writes of its items and counts.
		var last int64
		var created time.Time
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT max(seq) FROM job_items WHERE job_id = $1), 0), created_at FROM jobs WHERE id = $1 FOR UPDATE`, jobID).Scan(&last, &created); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		var done, skipped, failed int
		err := tx.QueryRow(ctx, `
			WITH r AS (
				SELECT r.id, r.outcome, r.detail, r.ord FROM unnest($2::uuid[], $3::text[], $4::text[]) WITH ORDINALITY AS r(id, outcome, detail, ord)
				WHERE NOT EXISTS (SELECT 1 FROM job_items i WHERE i.job_id = $1 AND i.created_at = $7 AND i.failure_id = r.id)),
			ins AS (
				INSERT INTO job_items (job_id, seq, failure_id, outcome, detail, done_at, created_at, failure_created_at)
				SELECT $1, $5 + row_number() OVER (ORDER BY r.ord), r.id, r.outcome, r.detail, $6, $7,
					(SELECT st.created_at FROM failure_states st WHERE st.id = r.id LIMIT 1) FROM r
				RETURNING outcome)
			SELECT count(*) FILTER (WHERE outcome = 'done'), count(*) FILTER (WHERE outcome = 'skipped'),
				count(*) FILTER (WHERE outcome = 'failed') FROM ins`, jobID, ids, outcomes, details, last, at, created).Scan(&done, &skipped, &failed)
		if err != nil {
			return err
		}
		if added = done + skipped + failed; added == 0 {
			return nil
		}
		var reserved int
		err = tx.QueryRow(ctx, `
			WITH old AS (SELECT job_reserved FROM chain_releases WHERE id = $1 FOR UPDATE)
			UPDATE chain_releases c SET job_reserved = greatest(0, old.job_reserved - $2) FROM old WHERE c.id = $1
			RETURNING old.job_reserved`, releaseID, added).Scan(&reserved)
		if errors.Is(err, pgx.ErrNoRows) {
			reserved, err = 0, nil
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			UPDATE jobs SET total = total + $2, done = done + $4, skipped = skipped + $5, failed = failed + $6, updated_at = $3`+
			jobDoneSet("done + $4 + skipped + $5 + failed + $6", "total + $2", "$3")+`
			WHERE id = $1`, jobID, max(0, added-reserved), at, done, skipped, failed)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("add chain job items: %w", err)
	}
	return added, nil
}

// ParkedBehind returns the failures parked behind head (a causing message, failure_links.head),
// whatever their state, in offset order, at most limit.
func (s *Store) ParkedBehind(ctx context.Context, head string, limit int) ([]ParkedLink, error) {
	out, _, err := s.chainMembers(ctx, head, false, limit)
	return out, err
}

// ReleaseOutcomes returns the outcome (the audit entry's "outcome" detail) of each failure the
// release with id resent or tried to, from the audit entries written with each attempt.
func (s *Store) ReleaseOutcomes(ctx context.Context, id uuid.UUID) (map[uuid.UUID]string, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT ON (failure_id) failure_id, coalesce(details->>'outcome', '')
		FROM audit_log WHERE details ? 'release_id' AND details->>'release_id' = $1 AND failure_id IS NOT NULL
		ORDER BY failure_id, at DESC, id DESC`, id.String())
	if err != nil {
		return nil, fmt.Errorf("release outcomes: %w", err)
	}
	out := map[uuid.UUID]string{}
	var fid uuid.UUID
	var o string
	_, err = pgx.ForEachRow(rows, []any{&fid, &o}, func() error { out[fid] = o; return nil })
	if err != nil {
		return nil, fmt.Errorf("release outcomes: %w", err)
	}
	return out, nil
}

// ParkedAmong returns those of ids that are parked behind the causing message of another of
// ids: the failures that a resend of the selection releases after their head, rather than
// sends alongside it.
func (s *Store) ParkedAmong(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	out := map[uuid.UUID]bool{}
	if len(ids) < 2 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT p.id FROM failures p JOIN failure_links l ON l.failure_id = p.id AND l.created_at = p.created_at
		WHERE p.id = ANY($1::uuid[])
		  AND l.head IN (SELECT h.causing_message FROM failures h WHERE h.id = ANY($1::uuid[]) AND h.causing_message <> p.causing_message)`, ids)
	if err != nil {
		return nil, fmt.Errorf("parked among: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("parked among: %w", err)
	}
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}

// DeleteOrphanLinks deletes the links (failure_links) of failures stored before before that
// are gone (retention dropped their partition), and returns how many it deleted.
func (s *Store) DeleteOrphanLinks(ctx context.Context, before time.Time) (int64, error) {
	ct, err := s.pool.Exec(ctx, `
		DELETE FROM failure_links l
		WHERE l.created_at < $1
		  AND NOT EXISTS (SELECT 1 FROM failure_states f WHERE f.id = l.failure_id AND f.created_at = l.created_at)`, before)
	if err != nil {
		return 0, fmt.Errorf("delete orphan links: %w", err)
	}
	return ct.RowsAffected(), nil
}
