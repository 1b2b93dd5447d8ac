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
	// Leased is true when a live resend claim holds the failure.
	Leased bool
}

// lockForAction takes the claim lock (claims.go), so that no resend claims the failures while
// the transaction runs, then locks the failures with the given ids (FOR UPDATE, in id order, so
// that concurrent actions cannot deadlock) and returns the existing ones; an id that is not
// returned does not exist.
func lockForAction(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, now time.Time) ([]lockedFailure, error) {
	if _, err := tx.Exec(ctx, lockClaimsSQL); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `
		SELECT f.id, f.state, f.id IN (`+liveClaimedSQL("$2")+`)
		FROM failure_states f WHERE f.id = ANY($1) ORDER BY f.id FOR UPDATE OF f`, ids, now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (lockedFailure, error) {
		var f lockedFailure
		err := row.Scan(&f.ID, &f.State, &f.Leased)
		return f, err
	})
}
