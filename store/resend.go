package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/redrive/redrive/avro"
)

// ResendItem is what a resend needs of a failure: the original record byte for byte, the
// service it is meant for, and the identity of its causing message.
type ResendItem struct {
	ID    uuid.UUID
	State State

	// The original record.
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte        // nil for a null key
	Value     []byte        // exactly as stored; nil for a null value (a tombstone)
	Headers   []avro.Header // in order, duplicates kept; a nil Value is a null value

	// SourceFormat is the format of the source the failure was read from: a resend leaves out
	// the headers that the format's writer added (SourceFormat.IsErrorHeader).
	SourceFormat SourceFormat
	// PublisherService is the service that failed to process the record.
	PublisherService string
	// CausingMessage identifies the message across resends.
	CausingMessage string
	// Attempt is the failure number of the causing message.
	Attempt int
	// ResendFailures counts the resends of this row that the broker did not acknowledge.
	ResendFailures int
	// NextAttemptAt is when a RETRY_PENDING failure is due; nil otherwise.
	NextAttemptAt *time.Time
	// GroupID is the failure's group.
	GroupID int64
}

const resendItemColumns = `f.id, f.state, f.original_topic, f.original_partition, f.original_offset,
	f.original_key, f.original_value, f.header_names, f.header_values, f.publisher_service,
	f.causing_message, f.attempt, f.resend_failures, f.next_attempt_at, f.group_id, f.source_format,
	f.original_value IS NULL`

func scanResendItems(rows pgx.Rows) ([]ResendItem, error) {
	defer rows.Close()
	var out []ResendItem
	for rows.Next() {
		var (
			it        ResendItem
			names     []string
			values    [][]byte
			valueNull bool
		)
		if err := rows.Scan(&it.ID, &it.State, &it.Topic, &it.Partition, &it.Offset, &it.Key, &it.Value,
			&names, &values, &it.PublisherService, &it.CausingMessage, &it.Attempt, &it.ResendFailures,
			&it.NextAttemptAt, &it.GroupID, &it.SourceFormat, &valueNull); err != nil {
			return nil, err
		}
		if len(names) != len(values) {
			return nil, fmt.Errorf("failure %s: %d header names but %d values", it.ID, len(names), len(values))
		}
		it.Headers = make([]avro.Header, len(names))
		for i := range names {
			it.Headers[i] = avro.Header{Name: names[i], Value: values[i]}
		}
		switch {
		case valueNull:
			it.Value = nil // a tombstone: resent as a null value
		case it.Value == nil:
			it.Value = []byte{} // an empty value stays a non-null one
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// DueCursor is a position in the order in which due failures are claimed: by next_attempt_at,
// then id. The zero DueCursor is before every failure.
type DueCursor struct {
	At time.Time
	ID uuid.UUID
}

// DueClaim is a batch of due failures claimed for a resend.
type DueClaim struct {
	// ID identifies the claim; 0 when nothing was claimed.
	ID int64
	// IDs are the claimed failures, in due order.
	IDs []uuid.UUID
	// Next is the cursor after the last claimed failure; the claim's cursor when it is empty.
	Next DueCursor
}

// ClaimDueResends claims up to limit RETRY_PENDING failures that are due at now, that come after
// the cursor in due order (next_attempt_at, id), and that no live claim holds, for owner until
// leaseUntil; the earliest due first. It is ClaimDueBatches for one batch; the claim is empty
// (ID 0, Next = after) when nothing is due.
func (s *Store) ClaimDueResends(ctx context.Context, owner string, now time.Time, after DueCursor, limit int, leaseUntil time.Time) (DueClaim, error) {
	claims, err := s.ClaimDueBatches(ctx, owner, now, after, limit, 1, leaseUntil)
	if err != nil || len(claims) == 0 {
		return DueClaim{Next: after}, err
	}
	return claims[0], nil
}

// ClaimDueBatches claims up to batches × batchSize RETRY_PENDING failures that are due at now,
// that come after the cursor in due order (next_attempt_at, id), and that no live claim holds,
// for owner until leaseUntil, as consecutive claims of batchSize failures (the last one may be
// smaller), in due order. It returns no claim when nothing is due.
//
// Claims are taken one at a time (claims.go), so concurrent callers never get the same failure
// while its claim runs. A claim reads only the index failures_due_idx (migration 005), in order,
// and writes one row per batch: it holds the claim lock for little more than the time to read
// the index entries, however large the records are. The caller loads the records
// (ResendItems) after the claim, in parallel with the next claim. A caller that claims again and
// again passes the cursor of its last claim (DueClaim.Next), so that each claim reads only
// entries it has not seen: the failures it claimed before stay RETRY_PENDING until they are
// marked. The claim is one short transaction: none stays open while the caller sends.
func (s *Store) ClaimDueBatches(ctx context.Context, owner string, now time.Time, after DueCursor, batchSize, batches int, leaseUntil time.Time) ([]DueClaim, error) {
	if batchSize <= 0 || batches <= 0 {
		return nil, fmt.Errorf("claim due resends: batch size %d and batches %d must be positive", batchSize, batches)
	}
	afterAt := pgtype.Timestamptz{Time: after.At, Valid: true}
	if after.At.IsZero() {
		afterAt.InfinityModifier = pgtype.NegativeInfinity
	}
	var claims []DueClaim
	// One round trip: under load every round trip waits for the CPU twice (client and server),
	// and the claim lock is held meanwhile. The lock is taken by a statement of its own, so that
	// the claim's snapshot, taken after it, sees every claim committed before.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// Read the due index in order and stop after limit rows. Without statistics on a burst of
	// newly due rows the planner may otherwise pick a bitmap scan of every due row and a sort,
	// for each claim. The penalty that disables a plan also lifts the plan's cost over the JIT
	// threshold, and compiling would cost far more than the claim: no JIT.
	b.Queue("SET LOCAL enable_bitmapscan = off")
	b.Queue("SET LOCAL enable_seqscan = off")
	b.Queue("SET LOCAL jit = off")
	// A claim is a lease, not a record: its commit does not wait for the WAL flush, which under
	// a mark's write burst costs more than the claim itself, with the claim lock held. If the
	// database crashes before the flush, the claim is gone and its failures may be resent by
	// another instance as well, as after any crash between a send and its mark (at-least-once).
	b.Queue("SET LOCAL synchronous_commit = off")
	b.Queue(lockClaimsSQL)
	b.Queue(`
		WITH picked AS (
			SELECT f.id, f.next_attempt_at, row_number() OVER (ORDER BY f.next_attempt_at, f.id) - 1 AS n
			FROM (
				SELECT f.id, f.next_attempt_at FROM failures f
				WHERE f.state = 'RETRY_PENDING' AND f.next_attempt_at <= $1
				  AND (f.next_attempt_at, f.id) > ($3::timestamptz, $4::uuid)
				  AND f.id NOT IN (`+liveClaimedSQL("$1")+`)
				ORDER BY f.next_attempt_at, f.id
				LIMIT $2
			) f
		), expired AS (
			DELETE FROM resend_claims WHERE lease_until <= $1
		)
		INSERT INTO resend_claims (owner, claimed_at, lease_until, failure_ids)
		SELECT $5, $1, $6, array_agg(id ORDER BY next_attempt_at, id) FROM picked GROUP BY n / $7
		RETURNING id, failure_ids,
			(SELECT f.next_attempt_at FROM failures f WHERE f.id = failure_ids[cardinality(failure_ids)])`,
		now, batchSize*batches, afterAt, after.ID, owner, leaseUntil, batchSize).Query(func(rows pgx.Rows) error {
		var (
			c  DueClaim
			at time.Time
		)
		_, err := pgx.ForEachRow(rows, []any{&c.ID, &c.IDs, &at}, func() error {
			c.Next = DueCursor{At: at, ID: c.IDs[len(c.IDs)-1]}
			claims = append(claims, c)
			c = DueClaim{}
			return nil
		})
		return err
	})
	b.Queue("COMMIT")
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("claim due resends: %w", err)
	}
	// The claims cover consecutive ranges of the due order: order them by where they end.
	sort.Slice(claims, func(i, j int) bool { return claims[i].Next.before(claims[j].Next) })
	return claims, nil
}

// before reports whether c comes before o in due order.
func (c DueCursor) before(o DueCursor) bool {
	if !c.At.Equal(o.At) {
		return c.At.Before(o.At)
	}
	return bytes.Compare(c.ID[:], o.ID[:]) < 0
}

// ResendItems returns the failures with the given ids that are RETRY_PENDING or PERMANENT, in the
// order of ids; a failure that does not exist or is in another state is absent.
func (s *Store) ResendItems(ctx context.Context, ids []uuid.UUID) ([]ResendItem, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+resendItemColumns+` FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n)
		JOIN failures f ON f.id = u.id
		WHERE f.state IN ('RETRY_PENDING', 'PERMANENT')
		ORDER BY u.n`, ids)
	if err != nil {
		return nil, fmt.Errorf("load resends: %w", err)
	}
	items, err := scanResendItems(rows)
	if err != nil {
		return nil, fmt.Errorf("load resends: %w", err)
	}
	return items, nil
}

// Refusal says why ClaimResends did not claim an existing failure.
type Refusal struct {
	// State is the failure's current state.
	State State
	// InProgress is true when the failure may be resent but another resend's claim holds it.
	InProgress bool
}

// ClaimResends claims the failures with the given ids for owner until leaseUntil, for a manual
// resend. It claims a failure only when it is RETRY_PENDING or PERMANENT and no live claim holds
// it. It returns the claimed items (in the order of ids) and, for each existing failure it did
// not claim, why; an id in neither does not exist. The claim has ID 0 when it holds nothing.
func (s *Store) ClaimResends(ctx context.Context, owner string, ids []uuid.UUID, now, leaseUntil time.Time) (ResendClaim, map[uuid.UUID]Refusal, error) {
	refused := make(map[uuid.UUID]Refusal)
	var claim ResendClaim
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		locked, err := lockForAction(ctx, tx, ids, now)
		if err != nil {
			return err
		}
		var want []uuid.UUID
		for _, f := range locked {
			switch {
			case !f.State.Resendable():
				refused[f.ID] = Refusal{State: f.State}
			case f.Leased:
				refused[f.ID] = Refusal{State: f.State, InProgress: true}
			default:
				want = append(want, f.ID)
			}
		}
		if len(want) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT `+resendItemColumns+` FROM failures f WHERE f.id = ANY($1)`, want)
		if err != nil {
			return err
		}
		if claim.Items, err = scanResendItems(rows); err != nil {
			return err
		}
		ids := make([]uuid.UUID, len(claim.Items))
		for i := range claim.Items {
			ids[i] = claim.Items[i].ID
		}
		claim.ID, err = insertClaim(ctx, tx, owner, now, leaseUntil, ids)
		return err
	})
	if err != nil {
		return ResendClaim{}, nil, fmt.Errorf("claim resends: %w", err)
	}
	pos := make(map[uuid.UUID]int, len(ids))
	for i, id := range ids {
		if _, ok := pos[id]; !ok {
			pos[id] = i
		}
	}
	sort.SliceStable(claim.Items, func(i, j int) bool { return pos[claim.Items[i].ID] < pos[claim.Items[j].ID] })
	return claim, refused, nil
}

// MarkResent moves the failures with the given ids from RETRY_PENDING or PERMANENT to RESENT at
// the time at, and releases the claims (those of owner among claims) that held them. It returns
// the ids it marked: an id is missing when its state changed meanwhile. When audit is not nil,
// it is called with the marked ids and the entries it returns are appended to the audit log in
// the same transaction; an entry with a zero At gets at.
//
// A failure is marked whether or not its claim is still live: the record was republished. When
// a claim expired before its mark and another resend claimed the failure again, the record is
// republished twice (at-least-once) and the later mark finds the failure RESENT already.
func (s *Store) MarkResent(ctx context.Context, owner string, claims []int64, ids []uuid.UUID, at time.Time, audit func(marked []uuid.UUID) []AuditEntry) ([]uuid.UUID, error) {
	var marked []uuid.UUID
	if audit == nil {
		// One statement: the scheduler marks batch after batch.
		rows, err := s.pool.Query(ctx, `
			WITH released AS (DELETE FROM resend_claims WHERE id = ANY($3) AND owner = $4)
			UPDATE failures SET state = 'RESENT', resent_at = $2, updated_at = $2
			WHERE id = ANY($1) AND state IN ('RETRY_PENDING', 'PERMANENT')
			RETURNING id`, ids, at, claims, owner)
		if err == nil {
			marked, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		}
		if err != nil {
			return nil, fmt.Errorf("mark resent: %w", err)
		}
		return marked, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if len(ids) > 0 {
			rows, err := tx.Query(ctx, `
				UPDATE failures SET state = 'RESENT', resent_at = $2, updated_at = $2
				WHERE id = ANY($1) AND state IN ('RETRY_PENDING', 'PERMANENT')
				RETURNING id`, ids, at)
			if err != nil {
				return err
			}
			if marked, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID]); err != nil {
				return err
			}
		}
		if err := releaseClaims(ctx, tx, owner, claims); err != nil {
			return err
		}
		return resendInsertAudit(ctx, tx, audit(marked), at)
	})
	if err != nil {
		return nil, fmt.Errorf("mark resent: %w", err)
	}
	return marked, nil
}

// resendInsertAudit appends entries to the audit log in one statement.
func resendInsertAudit(ctx context.Context, tx pgx.Tx, entries []AuditEntry, at time.Time) error {
	if len(entries) == 0 {
		return nil
	}
	var (
		failureIDs = make([]*uuid.UUID, len(entries))
		groupIDs   = make([]*int64, len(entries))
		actions    = make([]string, len(entries))
		principals = make([]string, len(entries))
		reasons    = make([]*string, len(entries))
		details    = make([]*string, len(entries))
		ats        = make([]time.Time, len(entries))
	)
	for i, e := range entries {
		failureIDs[i], groupIDs[i], actions[i], principals[i], reasons[i] = e.FailureID, e.GroupID, e.Action, e.Principal, e.Reason
		if e.Details != nil {
			b, err := json.Marshal(e.Details)
			if err != nil {
				return fmt.Errorf("audit details: %w", err)
			}
			d := string(b)
			details[i] = &d
		}
		ats[i] = e.At
		if ats[i].IsZero() {
			ats[i] = at
		}
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO audit_log (failure_id, group_id, action, principal, reason, details, at)
		SELECT u.failure_id, u.group_id, u.action, u.principal, u.reason, u.details::jsonb, u.at
		FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
			AS u(failure_id, group_id, action, principal, reason, details, at)`,
		failureIDs, groupIDs, actions, principals, reasons, details, ats)
	if err != nil {
		return fmt.Errorf("insert audit: %w", err)
	}
	return nil
}

// ResendFailure is a resend that the broker did not acknowledge.
type ResendFailure struct {
	ID uuid.UUID
	// Error is the producer's error text.
	Error string
	// NextAttemptAt is when a RETRY_PENDING failure is due again; ignored for other states.
	NextAttemptAt time.Time
}

// RecordResendFailures records unacknowledged resends of claimed failures: each keeps its state,
// counts one more resend failure (not a new failure of its message), keeps the error text, and
// is due again at NextAttemptAt when RETRY_PENDING. A failure whose state changed meanwhile to
// neither is left alone. The claim stays until MarkResent releases it (or it expires): until
// then no other resend claims these failures. It returns how many rows it updated.
func (s *Store) RecordResendFailures(ctx context.Context, at time.Time, failures []ResendFailure) (int64, error) {
	if len(failures) == 0 {
		return 0, nil
	}
	ids := make([]uuid.UUID, len(failures))
	errs := make([]string, len(failures))
	nexts := make([]time.Time, len(failures))
	for i, f := range failures {
		ids[i], errs[i], nexts[i] = f.ID, f.Error, f.NextAttemptAt
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE failures f SET resend_failures = f.resend_failures + 1, last_resend_error = u.err,
			next_attempt_at = CASE WHEN f.state = 'RETRY_PENDING' THEN u.next_at ELSE f.next_attempt_at END,
			updated_at = $1
		FROM unnest($2::uuid[], $3::text[], $4::timestamptz[]) AS u(id, err, next_at)
		WHERE f.id = u.id AND f.state IN ('RETRY_PENDING', 'PERMANENT')`, at, ids, errs, nexts)
	if err != nil {
		return 0, fmt.Errorf("record resend failures: %w", err)
	}
	return tag.RowsAffected(), nil
}

// ExhaustRetries moves claimed RETRY_PENDING failures to PERMANENT with the given state_reason
// (the retry policy's "retries exhausted"). It returns the ids it moved.
func (s *Store) ExhaustRetries(ctx context.Context, ids []uuid.UUID, reason string, at time.Time) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
		UPDATE failures SET state = 'PERMANENT', state_reason = $2, updated_at = $3
		WHERE id = ANY($1) AND state = 'RETRY_PENDING'
		RETURNING id`, ids, reason, at)
	if err != nil {
		return nil, fmt.Errorf("exhaust retries: %w", err)
	}
	moved, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("exhaust retries: %w", err)
	}
	return moved, nil
}

// OldestDue returns the earliest next_attempt_at of the RETRY_PENDING failures due at now, and
// false when none is due.
func (s *Store) OldestDue(ctx context.Context, now time.Time) (time.Time, bool, error) {
	var oldest *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT min(next_attempt_at) FROM failures
		WHERE state = 'RETRY_PENDING' AND next_attempt_at <= $1`, now).Scan(&oldest)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest due resend: %w", err)
	}
	if oldest == nil {
		return time.Time{}, false, nil
	}
	return *oldest, true, nil
}

// DeleteExpired deletes up to limit failures in state that reached it before cutoff, the
// oldest first, and then the groups that this left empty. A RESENT failure's age counts from
// resent_at, a CLOSED one's from closed_at, a PERMANENT one's from its last change (updated_at).
// RETRY_PENDING failures are never deleted: asking for them is an error. Rows that another
// transaction holds are skipped, so concurrent callers share the work. The audit log is kept.
func (s *Store) DeleteExpired(ctx context.Context, state State, cutoff time.Time, limit int) (failures, groups int64, err error) {
	var since string
	switch state {
	case StateResent:
		since = "coalesce(resent_at, updated_at)"
	case StateClosed:
		since = "coalesce(closed_at, updated_at)"
	case StatePermanent:
		since = "updated_at"
	default:
		return 0, 0, fmt.Errorf("delete expired: refusing to delete %s failures", state)
	}
	// created_at < cutoff follows from since < cutoff; it lets the (state, created_at) index
	// narrow the scan.
	rows, err := s.pool.Query(ctx, `
		WITH doomed AS (
			SELECT id FROM failures
			WHERE state = $1 AND created_at < $2 AND `+since+` < $2
			ORDER BY created_at
			LIMIT $3
			FOR UPDATE SKIP LOCKED
		)
		DELETE FROM failures f USING doomed WHERE f.id = doomed.id
		RETURNING f.group_id`, state, cutoff, limit)
	if err != nil {
		return 0, 0, fmt.Errorf("delete expired %s failures: %w", state, err)
	}
	groupIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, 0, fmt.Errorf("delete expired %s failures: %w", state, err)
	}
	failures = int64(len(groupIDs))
	groups, err = s.resendDeleteEmptyGroups(ctx, groupIDs)
	return failures, groups, err
}

// resendDeleteEmptyGroups deletes those of the groups that no failure references. A failure that
// arrives for a group meanwhile wins: the foreign key refuses the delete, and the group stays.
func (s *Store) resendDeleteEmptyGroups(ctx context.Context, ids []int64) (int64, error) {
	ids = resendUniqueInt64(ids)
	if len(ids) == 0 {
		return 0, nil
	}
	const q = `DELETE FROM failure_groups g
		WHERE g.id = ANY($1) AND NOT EXISTS (SELECT 1 FROM failures f WHERE f.group_id = g.id)`
	tag, err := s.pool.Exec(ctx, q, ids)
	if err == nil {
		return tag.RowsAffected(), nil
	}
	if !resendIsFKViolation(err) {
		return 0, fmt.Errorf("delete empty groups: %w", err)
	}
	// A failure was added to one of them concurrently: go one by one.
	var n int64
	for _, id := range ids {
		tag, err := s.pool.Exec(ctx, q, []int64{id})
		switch {
		case err == nil:
			n += tag.RowsAffected()
		case resendIsFKViolation(err):
		default:
			return n, fmt.Errorf("delete empty group %d: %w", id, err)
		}
	}
	return n, nil
}

func resendIsFKViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

func resendUniqueInt64(in []int64) []int64 {
	seen := make(map[int64]struct{}, len(in))
	out := in[:0:0]
	for _, v := range in {
		if _, ok := seen[v]; !ok {
			seen[v] = struct{}{}
			out = append(out, v)
		}
	}
	return out
}
