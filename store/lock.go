package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// lockedFailure is a failure locked for an operator action, with what the action needs to know.
type lockedFailure struct {
	ID    uuid.UUID
	State State
	// Leased is true when a resend holds an unexpired lease on the failure.
	Leased bool
}

// lockForAction locks the failures with the given ids (FOR UPDATE, in id order, as the resend
// claims lock, so that concurrent actions cannot deadlock) and returns the existing ones; an id
// that is not returned does not exist.
func lockForAction(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, now time.Time) ([]lockedFailure, error) {
	rows, err := tx.Query(ctx, `SELECT id, state, lease_until FROM failures WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (lockedFailure, error) {
		var (
			f     lockedFailure
			lease *time.Time
		)
		err := row.Scan(&f.ID, &f.State, &lease)
		f.Leased = lease != nil && lease.After(now)
		return f, err
	})
}
