package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/avro"
)

// ResendItem is what a resend needs of a failure: the original record byte for byte, the
// service it is meant for, and the identity of its causing message.
type ResendItem struct {
	ID    uuid.UUID
	State State
	// CreatedAt is when the failure was stored: with ID, where its record and state are.
	CreatedAt time.Time

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
	// Cluster is the Kafka cluster the failure was read from, where its resend goes.
	Cluster string
	// TargetCluster, set by a resend to another cluster, is where it goes instead; "" means
	// Cluster.
	TargetCluster string
}

// Destination returns the cluster the item is sent to: TargetCluster, else Cluster, else
// DefaultCluster.
func (it *ResendItem) Destination() string {
	switch {
	case it.TargetCluster != "":
		return it.TargetCluster
	case it.Cluster != "":
		return it.Cluster
	}
	return DefaultCluster
}

// resendItemColumns are the columns of a ResendItem in the failures view f.
var resendItemColumns = resendColumns("f.", "f.")

// resendColumns are the columns of a ResendItem, those of the record prefixed with rec and those
// of the state with st.
func resendColumns(rec, st string) string {
	return rec + `id, ` + st + `state, ` + rec + `created_at, ` + rec + `original_topic, ` + rec + `original_partition, ` +
		rec + `original_offset, ` + rec + `original_key, ` + rec + `original_value, ` + rec + `header_names, ` +
		rec + `header_values, ` + rec + `publisher_service, ` + rec + `causing_message, ` + rec + `attempt, ` +
		st + `resend_failures, ` + st + `next_attempt_at, ` + st + `group_id, ` + rec + `source_format, ` +
		rec + `original_value IS NULL, ` + rec + `cluster`
}

func scanResendItems(rows pgx.Rows) ([]ResendItem, error) {
	defer rows.Close()
	var out []ResendItem
	for rows.Next() {
		var (
			it        ResendItem
			id        [16]byte // not uuid.UUID: see uuids.go
			names     []string
			values    [][]byte
			valueNull bool
		)
		if err := rows.Scan(&id, &it.State, &it.CreatedAt, &it.Topic, &it.Partition, &it.Offset, &it.Key, &it.Value,
			&names, &values, &it.PublisherService, &it.CausingMessage, &it.Attempt, &it.ResendFailures,
			&it.NextAttemptAt, &it.GroupID, &it.SourceFormat, &valueNull, &it.Cluster); err != nil {
			return nil, err
		}
		it.ID = id
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

// ResendItems returns the failures with the given ids that are RETRY_PENDING or PERMANENT, in the
// order of ids; a failure that does not exist or is in another state is absent.
func (s *Store) ResendItems(ctx context.Context, ids []uuid.UUID) ([]ResendItem, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+resendItemColumns+` FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n)
		JOIN failures f ON f.id = u.id
		WHERE f.state IN ('RETRY_PENDING', 'PERMANENT')
		ORDER BY u.n`, uuidArray(ids))
	if err != nil {
		return nil, fmt.Errorf("load resends: %w", err)
	}
	items, err := scanResendItems(rows)
	if err != nil {
		return nil, fmt.Errorf("load resends: %w", err)
	}
	return items, nil
}

// ResendItemsAt is ResendItems for failures whose created_at is known (DueClaim.CreatedAt):
// createdAt[i] is the created_at of ids[i]. Each failure is looked up by its primary key (id,
// created_at), in its own partition of the records and of the states, instead of in every
// partition by id. A failure whose created_at is not the one given is absent. With createdAt
// nil it is ResendItems.
func (s *Store) ResendItemsAt(ctx context.Context, ids []uuid.UUID, createdAt []time.Time) ([]ResendItem, error) {
	if createdAt == nil {
		return s.ResendItems(ctx, ids)
	}
	if len(createdAt) != len(ids) {
		return nil, fmt.Errorf("load resends: %d ids but %d created_at", len(ids), len(createdAt))
	}
	// One probe of each primary key per failure, in the partition of its created_at (pruned at
	// run time). LATERAL … LIMIT 1 keeps the planner from joining otherwise: with a burst of
	// failures stored in one transaction (one created_at), it hashed a whole partition of the
	// states, or, with created_at = ANY($2) beside the join, walked another index of the records
	// from its start for every failure (375 ms for 500 failures of 10,000, against 9 ms).
	rows, err := s.pool.Query(ctx, `
		SELECT `+resendColumns("r.", "s.")+`
		FROM unnest($1::uuid[], $2::timestamptz[]) WITH ORDINALITY AS u(id, created_at, n)
		CROSS JOIN LATERAL (
			SELECT * FROM failure_states s WHERE s.id = u.id AND s.created_at = u.created_at
			  AND s.state IN ('RETRY_PENDING', 'PERMANENT') LIMIT 1) s
		CROSS JOIN LATERAL (
			SELECT * FROM failure_records r WHERE r.created_at = u.created_at AND r.id = u.id LIMIT 1) r
		ORDER BY u.n`, uuidArray(ids), createdAt)
	if err != nil {
		return nil, fmt.Errorf("load resends: %w", err)
	}
	items, err := scanResendItems(rows)
	if err != nil {
		return nil, fmt.Errorf("load resends: %w", err)
	}
	return items, nil
}

// MarkResentParams are the parameters of MarkResent.
type MarkResentParams struct {
	// Owner is the instance that took the claims.
	Owner string
	// Claims are the claims to release; those of other owners are left alone.
	Claims []int64
	// IDs are the failures that were republished.
	IDs []uuid.UUID
	// CreatedAt, when not nil, holds the created_at of each of IDs (DueClaim.CreatedAt): only
	// the partitions of those times are searched. Nil searches every partition.
	CreatedAt []time.Time
	// At is the time of the mark: resent_at, and the time of audit entries without one.
	At time.Time
	// Audit, when not nil, is called with the marked ids; the entries it returns are appended
	// to the audit log in the same transaction.
	Audit func(marked []uuid.UUID) []AuditEntry
}

// MarkResent moves the failures p.IDs from RETRY_PENDING or PERMANENT to RESENT at p.At, and
// releases the claims (those of p.Owner among p.Claims) that held them. It returns the ids it
// marked: an id is missing when its state changed meanwhile. With p.Audit, the audit entries are
// written in the same transaction; an entry with a zero At gets p.At.
//
// A failure is marked whether or not its claim is still live: the record was republished. When
// a claim expired before its mark and another resend claimed the failure again, the record is
// republished twice (at-least-once) and the later mark finds the failure RESENT already.
func (s *Store) MarkResent(ctx context.Context, p MarkResentParams) ([]uuid.UUID, error) {
	if p.CreatedAt != nil && len(p.CreatedAt) != len(p.IDs) {
		return nil, fmt.Errorf("mark resent: %d ids but %d created_at", len(p.IDs), len(p.CreatedAt))
	}
	var marked []uuid.UUID
	if p.Audit == nil {
		// One statement: the scheduler marks batch after batch.
		args := []any{uuidArray(p.IDs), p.At, p.Claims, p.Owner}
		where := byIDs("$1", "", p.CreatedAt, &args)
		rows, err := s.pool.Query(ctx, `
			WITH released AS (DELETE FROM resend_claims WHERE id = ANY($3) AND owner = $4)
			UPDATE failure_states SET state = 'RESENT', resent_at = $2, updated_at = $2
			WHERE `+where+` AND state IN ('RETRY_PENDING', 'PERMANENT')
			RETURNING id`, args...)
		if err == nil {
			marked, err = collectUUIDs(rows)
		}
		if err != nil {
			return nil, fmt.Errorf("mark resent: %w", err)
		}
		return marked, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if len(p.IDs) > 0 {
			args := []any{uuidArray(p.IDs), p.At}
			where := byIDs("$1", "", p.CreatedAt, &args)
			rows, err := tx.Query(ctx, `
				UPDATE failure_states SET state = 'RESENT', resent_at = $2, updated_at = $2
				WHERE `+where+` AND state IN ('RETRY_PENDING', 'PERMANENT')
				RETURNING id`, args...)
			if err != nil {
				return err
			}
			if marked, err = collectUUIDs(rows); err != nil {
				return err
			}
		}
		if err := releaseClaims(ctx, tx, p.Owner, p.Claims); err != nil {
			return err
		}
		entries := p.Audit(marked)
		for i := range entries {
			if entries[i].At.IsZero() {
				entries[i].At = p.At
			}
		}
		return writeAudit(ctx, tx, entries)
	})
	if err != nil {
		return nil, fmt.Errorf("mark resent: %w", err)
	}
	return marked, nil
}

// byIDs is the condition that selects the failure states (of the table prefix, such as "f." or
// "") whose ids are in the uuid[] parameter ids. With createdAt it also requires created_at to be
// one of createdAt, appended to args as the next parameter: the planner then searches only the
// partitions of those times, not every partition. A failure id names one failure whatever its
// created_at (ids are random UUIDs, generated once per stored failure), so the two lists select
// the same failures as the (id, created_at) pairs they are made of.
func byIDs(ids, prefix string, createdAt []time.Time, args *[]any) string {
	cond := prefix + "id = ANY(" + ids + ")"
	if createdAt == nil {
		return cond
	}
	*args = append(*args, createdAt)
	return cond + " AND " + prefix + "created_at = ANY($" + strconv.Itoa(len(*args)) + ")"
}

// ResendFailure is a resend that the broker did not acknowledge.
type ResendFailure struct {
	ID uuid.UUID
	// CreatedAt is the failure's created_at (ResendItem.CreatedAt), or zero when not known:
	// known, only its partition is searched.
	CreatedAt time.Time
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
	created := make([]time.Time, len(failures)) // nil when any is unknown
	for i, f := range failures {
		ids[i], errs[i], nexts[i] = f.ID, f.Error, f.NextAttemptAt
		if created != nil && !f.CreatedAt.IsZero() {
			created[i] = f.CreatedAt
		} else {
			created = nil
		}
	}
	args := []any{at, uuidArray(ids), errs, nexts}
	where := byIDs("$2", "f.", created, &args)
	tag, err := s.pool.Exec(ctx, `
		UPDATE failure_states f SET resend_failures = f.resend_failures + 1, last_resend_error = u.err,
			next_attempt_at = CASE WHEN f.state = 'RETRY_PENDING' THEN u.next_at ELSE f.next_attempt_at END,
			updated_at = $1
		FROM unnest($2::uuid[], $3::text[], $4::timestamptz[]) AS u(id, err, next_at)
		WHERE f.id = u.id AND `+where+` AND f.state IN ('RETRY_PENDING', 'PERMANENT')`, args...)
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
		UPDATE failure_states SET state = 'PERMANENT', state_reason = $2, updated_at = $3
		WHERE id = ANY($1) AND state = 'RETRY_PENDING'
		RETURNING id`, uuidArray(ids), reason, at)
	if err != nil {
		return nil, fmt.Errorf("exhaust retries: %w", err)
	}
	moved, err := collectUUIDs(rows)
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
		SELECT min(next_attempt_at) FROM failure_not_resent
		WHERE state = 'RETRY_PENDING' AND next_attempt_at <= $1`, now).Scan(&oldest)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest due resend: %w", err)
	}
	if oldest == nil {
		return time.Time{}, false, nil
	}
	return *oldest, true, nil
}
