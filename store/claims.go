package store

import (
	"context"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// A resend claims failures a batch at a time: one row of resend_claims (migration 006) names the
// failures of the batch and holds them for its owner until its lease_until. A failure is held,
// or leased, while a live claim (lease_until after now) names it.
//
// Claims are taken one at a time, each in a transaction that first takes the advisory lock
// claimLockKey: it reads the failures that live claims hold, claims others and commits, so no
// two live claims ever name the same failure. Operator actions that must not touch a failure
// being resent (close, a manual resend) take the same lock before they look (lockForAction).
// Marking the outcome of a resend needs no lock: it changes the failures' state and deletes the
// claim in one transaction, which a claim sees entirely or not at all.
//
// Compared with a lease written into every claimed failure, a claim writes one row per batch,
// and the failures are written once, when their outcome is known.

// ResendClaim is a batch of failures claimed for a manual resend, with their records.
type ResendClaim struct {
	// ID identifies the claim; 0 when it holds nothing.
	ID int64
	// Items are the claimed failures.
	Items []ResendItem
}

// claimLockKey is the key of the transaction-level advisory lock that serialises claims
// ("redrive" and the claim table's migration number).
const claimLockKey = 0x7265647269760006

// lockClaimsSQL takes the claim lock until the end of the transaction.
var lockClaimsSQL = "SELECT pg_advisory_xact_lock(" + strconv.FormatInt(claimLockKey, 10) + ")"

// liveClaimedSQL selects the ids of the failures that live claims hold at the timestamptz
// parameter $now (a placeholder such as "$1").
func liveClaimedSQL(now string) string {
	return `SELECT unnest(c.failure_ids) FROM resend_claims c WHERE c.lease_until > ` + now
}

// insertClaim records a claim of the failures ids for owner from now until leaseUntil, in a transaction
// that holds the claim lock, and deletes the claims that expired by now. It returns the
// claim's id.
func insertClaim(ctx context.Context, tx pgx.Tx, owner string, now, leaseUntil time.Time, ids []uuid.UUID) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, `
		WITH expired AS (DELETE FROM resend_claims WHERE lease_until <= $2)
		INSERT INTO resend_claims (owner, claimed_at, lease_until, failure_ids)
		VALUES ($1, $2, $3, $4) RETURNING id`, owner, now, leaseUntil, ids).Scan(&id)
	return id, err
}

// releaseClaims deletes those of the claims that owner holds.
func releaseClaims(ctx context.Context, tx pgx.Tx, owner string, claims []int64) error {
	if len(claims) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `DELETE FROM resend_claims WHERE id = ANY($1) AND owner = $2`, claims, owner)
	return err
}
