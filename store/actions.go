package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// CloseRequest asks to close failures.
type CloseRequest struct {
	// IDs are the failures to close, at most MaxCloseIDs; duplicates count once.
	IDs []uuid.UUID
	// Principal is who asks. Required.
	Principal string
	// Reason is why; it becomes the failures' closed_reason. Required.
	Reason string
	// Details are added to the details of every audit entry written.
	Details map[string]any
}

// CloseFailures closes the failures with the given ids: each one in RETRY_PENDING or PERMANENT
// that no resend holds becomes CLOSED with the reason, the principal and the time, and gets an
// audit log entry, in one transaction. It returns one result per distinct id, in request order.
func (s *Store) CloseFailures(ctx context.Context, req CloseRequest) ([]CloseResult, error) {
	ids := DistinctIDs(req.IDs)
	switch {
	case req.Principal == "":
		return nil, errors.New("close failures: a principal is required")
	case req.Reason == "":
		return nil, errors.New("close failures: a reason is required")
	case len(ids) > MaxCloseIDs:
		return nil, fmt.Errorf("close failures: %d ids, at most %d", len(ids), MaxCloseIDs)
	}
	results := make([]CloseResult, len(ids))
	index := make(map[uuid.UUID]*CloseResult, len(ids))
	for i, id := range ids {
		results[i] = CloseResult{ID: id, Outcome: CloseNotFound, Detail: "no failure has this id"}
		index[id] = &results[i]
	}
	now := s.now()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		locked, err := lockForAction(ctx, tx, ids, now)
		if err != nil {
			return err
		}
		var closable []uuid.UUID
		for _, f := range locked {
			r := index[f.ID]
			r.State = f.State
			switch {
			case !f.State.Closable():
				r.Outcome, r.Detail = CloseConflict, (&TransitionError{ID: f.ID, From: f.State, Action: "close"}).Error()
			case f.Leased:
				r.Outcome, r.Detail = CloseConflict, "a resend of this failure is in progress"
			default:
				r.Outcome, r.Detail = CloseClosed, ""
				closable = append(closable, f.ID)
			}
		}
		if len(closable) == 0 {
			return nil
		}
		tag, err := tx.Exec(ctx, `
			UPDATE failure_states SET state = 'CLOSED', closed_reason = $2, closed_by = $3, closed_at = $4,
				updated_at = $4, next_attempt_at = NULL
			WHERE id = ANY($1) AND state IN ('RETRY_PENDING', 'PERMANENT')`,
			closable, req.Reason, req.Principal, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != int64(len(closable)) {
			// The rows are locked: this cannot happen unless the schema changed underneath.
			return fmt.Errorf("closed %d of %d locked failures", tag.RowsAffected(), len(closable))
		}
		entries := make([]AuditEntry, len(closable))
		for i, id := range closable {
			details := map[string]any{"from_state": string(index[id].State)}
			for k, v := range req.Details {
				details[k] = v
			}
			entries[i] = AuditEntry{FailureID: &id, Action: AuditActionClose, Principal: req.Principal, Reason: &req.Reason, Details: details, At: now}
		}
		return writeAudit(ctx, tx, entries)
	})
	if err != nil {
		return nil, fmt.Errorf("close failures: %w", err)
	}
	return results, nil
}

// CloseFailure closes one failure as CloseFailures does. It returns ErrNotFound, or a
// *TransitionError (wrapping ErrConflict) when the failure cannot be closed in its state.
func (s *Store) CloseFailure(ctx context.Context, id uuid.UUID, principal, reason string) error {
	res, err := s.CloseFailures(ctx, CloseRequest{IDs: []uuid.UUID{id}, Principal: principal, Reason: reason})
	if err != nil {
		return err
	}
	switch r := res[0]; r.Outcome {
	case CloseNotFound:
		return ErrNotFound
	case CloseConflict:
		return &TransitionError{ID: id, From: r.State, Action: "close"}
	}
	return nil
}

// ActionState is what decides whether an operator's action applies to a failure.
type ActionState struct {
	State State
	// Leased is true while a resend holds the failure.
	Leased bool
}

// ActionStates returns the state of each existing failure among ids, and whether a resend
// holds it at now, for a dry run of an action. Ids that do not exist are absent.
func (s *Store) ActionStates(ctx context.Context, ids []uuid.UUID, now time.Time) (map[uuid.UUID]ActionState, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT f.id, f.state, f.id IN (`+liveClaimedSQL("$2")+`)
		FROM failure_states f WHERE f.id = ANY($1)`, ids, now)
	if err != nil {
		return nil, fmt.Errorf("action states: %w", err)
	}
	defer rows.Close()
	out := make(map[uuid.UUID]ActionState, len(ids))
	for rows.Next() {
		var (
			id uuid.UUID
			st ActionState
		)
		if err := rows.Scan(&id, &st.State, &st.Leased); err != nil {
			return nil, fmt.Errorf("action states: %w", err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("action states: %w", err)
	}
	return out, nil
}

// DistinctIDs returns ids without duplicates, keeping the first occurrence of each.
func DistinctIDs(ids []uuid.UUID) []uuid.UUID {
	seen := make(map[uuid.UUID]struct{}, len(ids))
	out := make([]uuid.UUID, 0, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}
