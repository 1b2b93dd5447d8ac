package store

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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
		VALUES ($1, $2, $3, $4) RETURNING id`, owner, now, leaseUntil, uuidArray(ids)).Scan(&id)
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
	// CreatedAt holds each claimed failure's created_at, parallel to IDs: the partition of its
	// record and state, which ResendItemsAt, MarkResent and RecordResendFailures look up by
	// (id, created_at) instead of probing every partition by id.
	CreatedAt []time.Time
	// Next is the cursor after the last claimed failure; the claim's cursor when it is empty.
	Next DueCursor
}

// ClaimDueParams are the parameters of ClaimDueBatches.
type ClaimDueParams struct {
	// Owner names the claiming instance: only it releases its claims (MarkResent).
	Owner string
	// Now is the time at which failures are due and earlier claims have expired.
	Now time.Time
	// After is the cursor: only failures after it in due order are claimed. The zero
	// DueCursor is before every failure.
	After DueCursor
	// BatchSize is the most failures of one claim; it must be positive.
	BatchSize int
	// Batches is the most claims taken; it must be positive.
	Batches int
	// LeaseUntil is when the claims expire.
	LeaseUntil time.Time
}

// ClaimDueBatches claims up to p.Batches × p.BatchSize RETRY_PENDING failures that are due at
// p.Now, that come after p.After in due order (next_attempt_at, id), and that no live claim
// holds, for p.Owner until p.LeaseUntil, as consecutive claims of p.BatchSize failures (the
// last one may be smaller), in due order. It returns no claim when nothing is due.
//
// Claims are taken one at a time (claims.go), so concurrent callers never get the same failure
// while its claim runs. A claim reads the index failure_not_resent_due_idx (migrations 005 and
// 026) in order, with each claimed failure's created_at, and writes one row per batch: it
// holds the claim lock for little more than the time to read the index entries, however large
// the records are. The caller loads the records (ResendItemsAt, by id and created_at) after the
// claim, in parallel with the next claim. A caller that claims again and
// again passes the cursor of its last claim (DueClaim.Next), so that each claim reads only
// entries it has not seen: the failures it claimed before stay RETRY_PENDING until they are
// marked. The claim is one short transaction: none stays open while the caller sends.
func (s *Store) ClaimDueBatches(ctx context.Context, p ClaimDueParams) ([]DueClaim, error) {
	if p.BatchSize <= 0 || p.Batches <= 0 {
		return nil, fmt.Errorf("claim due resends: batch size %d and batches %d must be positive", p.BatchSize, p.Batches)
	}
	afterAt := pgtype.Timestamptz{Time: p.After.At, Valid: true}
	if p.After.At.IsZero() {
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
			SELECT f.id, f.created_at, f.next_attempt_at, row_number() OVER (ORDER BY f.next_attempt_at, f.id) - 1 AS n
			FROM (
				SELECT f.id, f.created_at, f.next_attempt_at FROM failure_not_resent f
				WHERE f.state = 'RETRY_PENDING' AND f.next_attempt_at <= $1
				  AND (f.next_attempt_at, f.id) > ($3::timestamptz, $4::uuid)
				  AND f.id NOT IN (`+liveClaimedSQL("$1")+`)
				ORDER BY f.next_attempt_at, f.id
				LIMIT $2
			) f
		), grouped AS (
			SELECT array_agg(id ORDER BY n) AS ids, array_agg(created_at ORDER BY n) AS created,
				(array_agg(next_attempt_at ORDER BY n DESC))[1] AS last_at
			FROM picked GROUP BY n / $7
		), expired AS (
			DELETE FROM resend_claims WHERE lease_until <= $1
		), claimed AS (
			INSERT INTO resend_claims (owner, claimed_at, lease_until, failure_ids)
			SELECT $5, $1, $6, ids FROM grouped
			RETURNING id, failure_ids
		)
		SELECT c.id, c.failure_ids, g.created, g.last_at FROM claimed c JOIN grouped g ON g.ids = c.failure_ids`,
		p.Now, p.BatchSize*p.Batches, afterAt, p.After.ID, p.Owner, p.LeaseUntil, p.BatchSize).Query(func(rows pgx.Rows) error {
		var (
			c  DueClaim
			at time.Time
		)
		_, err := pgx.ForEachRow(rows, []any{&c.ID, &c.IDs, &c.CreatedAt, &at}, func() error {
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

// Refusal says why ClaimResends did not claim an existing failure.
type Refusal struct {
	// State is the failure's current state.
	State State
	// InProgress is true when the failure may be resent but another resend's claim holds it.
	InProgress bool
}

// ClaimResendsParams are the parameters of ClaimResends.
type ClaimResendsParams struct {
	// Owner names the claiming instance: only it releases the claim (MarkResent).
	Owner string
	// IDs are the failures to claim.
	IDs []uuid.UUID
	// Now is the time at which earlier claims have expired.
	Now time.Time
	// LeaseUntil is when the claim expires.
	LeaseUntil time.Time
}

// ClaimResends claims the failures p.IDs for p.Owner until p.LeaseUntil, for a manual resend.
// It claims a failure only when it is RETRY_PENDING or PERMANENT and no live claim holds it. It
// returns the claimed items (in the order of p.IDs) and, for each existing failure it did not
// claim, why; an id in neither does not exist. The claim has ID 0 when it holds nothing.
//
// The claim lock is held for one statement that reads the failures' states through their
// primary key and inserts the claim; the failures are neither locked nor written. Any operator
// action that could change their state takes the claim lock first and then sees the claim (as
// a close does), and the mark of a resend checks the state again. The records are read after
// the claim committed, without the lock. As for ClaimDueBatches, the claim's commit does not
// wait for the WAL flush: a claim is a lease, and a database crash that loses it leaves its
// failures resendable, as after any crash between a send and its mark.
func (s *Store) ClaimResends(ctx context.Context, p ClaimResendsParams) (ResendClaim, map[uuid.UUID]Refusal, error) {
	ids := p.IDs
	refused := make(map[uuid.UUID]Refusal)
	var (
		claim ResendClaim
		want  []uuid.UUID
	)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit = off")
	b.Queue(lockClaimsSQL)
	b.Queue(`
		WITH f AS (
			SELECT f.id, f.state, f.id IN (`+liveClaimedSQL("$2")+`) AS leased
			FROM failure_states f WHERE f.id = ANY($1)
		), expired AS (
			DELETE FROM resend_claims WHERE lease_until <= $2
		), claimed AS (
			INSERT INTO resend_claims (owner, claimed_at, lease_until, failure_ids)
			SELECT $3, $2, $4, array_agg(f.id ORDER BY f.id) FROM f
			WHERE f.state IN ('RETRY_PENDING', 'PERMANENT') AND NOT f.leased
			HAVING count(*) > 0
			RETURNING id
		)
		SELECT f.id, f.state, f.leased, coalesce((SELECT id FROM claimed), 0) FROM f`,
		uuidArray(ids), p.Now, p.Owner, p.LeaseUntil).Query(func(rows pgx.Rows) error {
		var (
			id     [16]byte
			state  State
			leased bool
		)
		_, err := pgx.ForEachRow(rows, []any{&id, &state, &leased, &claim.ID}, func() error {
			switch {
			case !state.Resendable():
				refused[id] = Refusal{State: state}
			case leased:
				refused[id] = Refusal{State: state, InProgress: true}
			default:
				want = append(want, id)
			}
			return nil
		})
		return err
	})
	b.Queue("COMMIT")
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return ResendClaim{}, nil, fmt.Errorf("claim resends: %w", err)
	}
	if len(want) == 0 {
		return ResendClaim{}, refused, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+resendItemColumns+` FROM failures f WHERE f.id = ANY($1)`, uuidArray(want))
	if err == nil {
		claim.Items, err = scanResendItems(rows)
	}
	if err != nil {
		// Nothing was sent: release the claim, even when ctx ended (if that fails too, the
		// claim expires).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = s.pool.Exec(rctx, `DELETE FROM resend_claims WHERE id = $1 AND owner = $2`, claim.ID, p.Owner)
		return ResendClaim{}, nil, fmt.Errorf("claim resends: load records: %w", err)
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
