package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/avro"
)

const revisionColumns = `id, failure_id, principal, reason, target_topic, key, value, header_names, header_values,
	created_at, coalesce(outcome, ''), outcome_error, resent_at`

func scanRevision(row pgx.Row) (*Revision, error) {
	var (
		r      Revision
		names  []string
		values [][]byte
	)
	if err := row.Scan(&r.ID, &r.FailureID, &r.Principal, &r.Reason, &r.TargetTopic, &r.Key, &r.Value, &names, &values,
		&r.CreatedAt, &r.Outcome, &r.OutcomeError, &r.ResentAt); err != nil {
		return nil, err
	}
	r.Headers = make([]avro.Header, len(names))
	for i := range names {
		r.Headers[i] = avro.Header{Name: names[i], Value: values[i]}
	}
	return &r, nil
}

// CreateRevision stores r (its ID and CreatedAt are set) with a "repair" audit entry, in one
// transaction. The failure must exist (ErrNotFound otherwise).
func (s *Store) CreateRevision(ctx context.Context, r *Revision) error {
	names := make([]string, len(r.Headers))
	values := make([][]byte, len(r.Headers))
	for i, h := range r.Headers {
		names[i], values[i] = h.Name, h.Value
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM failure_states WHERE id = $1)`, r.FailureID).Scan(&exists); err != nil {
			return fmt.Errorf("create revision: %w", err)
		}
		if !exists {
			return ErrNotFound
		}
		if err := tx.QueryRow(ctx, `
			INSERT INTO failure_revisions (failure_id, principal, reason, target_topic, key, value, header_names, header_values, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
			r.FailureID, r.Principal, r.Reason, r.TargetTopic, r.Key, r.Value, names, values, r.CreatedAt).Scan(&r.ID); err != nil {
			return fmt.Errorf("create revision: %w", err)
		}
		return writeAudit(ctx, tx, []AuditEntry{{FailureID: &r.FailureID, Action: AuditActionRepair, Principal: r.Principal,
			Reason: &r.Reason, Details: map[string]any{"revision": r.ID, "target_topic": r.TargetTopic}, At: r.CreatedAt}})
	})
}

// SettleRevision records the outcome of a revision's resend.
func (s *Store) SettleRevision(ctx context.Context, id int64, outcome, detail string, at time.Time) error {
	var errText *string
	if detail != "" {
		errText = &detail
	}
	_, err := s.pool.Exec(ctx, `UPDATE failure_revisions SET outcome = $2, outcome_error = $3,
		resent_at = CASE WHEN $2 = 'resent' THEN $4::timestamptz END WHERE id = $1`, id, outcome, errText, at)
	if err != nil {
		return fmt.Errorf("settle revision: %w", err)
	}
	return nil
}

// Revisions returns the revisions of a failure, oldest first.
func (s *Store) Revisions(ctx context.Context, failureID uuid.UUID) ([]Revision, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+revisionColumns+` FROM failure_revisions WHERE failure_id = $1 ORDER BY id`, failureID)
	if err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Revision, error) {
		rev, err := scanRevision(r)
		if err != nil {
			return Revision{}, err
		}
		return *rev, nil
	})
	if err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	return out, nil
}

// RevisionByID returns a revision, or ErrNotFound.
func (s *Store) RevisionByID(ctx context.Context, id int64) (*Revision, error) {
	r, err := scanRevision(s.pool.QueryRow(ctx, `SELECT `+revisionColumns+` FROM failure_revisions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("revision: %w", err)
	}
	return r, nil
}
