package store

import (
	"context"
	"fmt"
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
			id        [16]byte // not uuid.UUID: see uuids.go
			names     []string
			values    [][]byte
			valueNull bool
		)
		if err := rows.Scan(&id, &it.State, &it.Topic, &it.Partition, &it.Offset, &it.Key, &it.Value,
			&names, &values, &it.PublisherService, &it.CausingMessage, &it.Attempt, &it.ResendFailures,
			&it.NextAttemptAt, &it.GroupID, &it.SourceFormat, &valueNull); err != nil {
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

// MarkResentParams are the parameters of MarkResent.
type MarkResentParams struct {
	// Owner is the instance that took the claims.
	Owner string
	// Claims are the claims to release; those of other owners are left alone.
	Claims []int64
	// IDs are the failures that were republished.
	IDs []uuid.UUID
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
	var marked []uuid.UUID
	if p.Audit == nil {
		// One statement: the scheduler marks batch after batch.
		rows, err := s.pool.Query(ctx, `
			WITH released AS (DELETE FROM resend_claims WHERE id = ANY($3) AND owner = $4)
			UPDATE failure_states SET state = 'RESENT', resent_at = $2, updated_at = $2
			WHERE id = ANY($1) AND state IN ('RETRY_PENDING', 'PERMANENT')
			RETURNING id`, uuidArray(p.IDs), p.At, p.Claims, p.Owner)
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
			rows, err := tx.Query(ctx, `
				UPDATE failure_states SET state = 'RESENT', resent_at = $2, updated_at = $2
				WHERE id = ANY($1) AND state IN ('RETRY_PENDING', 'PERMANENT')
				RETURNING id`, uuidArray(p.IDs), p.At)
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
		UPDATE failure_states f SET resend_failures = f.resend_failures + 1, last_resend_error = u.err,
			next_attempt_at = CASE WHEN f.state = 'RETRY_PENDING' THEN u.next_at ELSE f.next_attempt_at END,
			updated_at = $1
		FROM unnest($2::uuid[], $3::text[], $4::timestamptz[]) AS u(id, err, next_at)
		WHERE f.id = u.id AND f.state IN ('RETRY_PENDING', 'PERMANENT')`, at, uuidArray(ids), errs, nexts)
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
		SELECT min(next_attempt_at) FROM failure_states
		WHERE state = 'RETRY_PENDING' AND next_attempt_at <= $1`, now).Scan(&oldest)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest due resend: %w", err)
	}
	if oldest == nil {
		return time.Time{}, false, nil
	}
	return *oldest, true, nil
}
