package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DeleteExpired deletes up to limit failures of the default partition (partitions.go) in state
// that reached it before cutoff, the oldest first, with their keys and revisions, and then the
// groups that this left empty. A RESENT failure's age counts from resent_at, a CLOSED one's from
// closed_at, a PERMANENT one's from its last change (updated_at). RETRY_PENDING failures are
// never deleted: asking for them is an error. Rows that another transaction holds are skipped,
// so concurrent callers share the work. The audit log is kept. The periods' partitions are not
// touched: DropExpiredPartitions drops them whole.
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
			SELECT id, created_at FROM failure_states_default
			WHERE state = $1 AND created_at < $2 AND `+since+` < $2
			ORDER BY created_at
			LIMIT $3
			FOR UPDATE SKIP LOCKED
		), states AS (
			DELETE FROM failure_states_default s USING doomed
			WHERE s.id = doomed.id AND s.created_at = doomed.created_at
			RETURNING s.id, s.created_at, s.group_id
		), not_resent AS (
			-- A statement on a partition fires no trigger of failure_states (migration 026).
			DELETE FROM failure_not_resent n USING states WHERE n.created_at = states.created_at AND n.id = states.id
		), records AS (
			DELETE FROM failure_records_default r USING states
			WHERE r.id = states.id AND r.created_at = states.created_at
			RETURNING r.id, r.idempotence_id
		), keys AS (
			DELETE FROM failure_keys k USING records WHERE k.idempotence_id = records.idempotence_id AND k.failure_id = records.id
		), revisions AS (
			DELETE FROM failure_revisions v USING records WHERE v.failure_id = records.id
		)
		SELECT group_id FROM states`, state, cutoff, limit)
	if err != nil {
		return 0, 0, fmt.Errorf("delete expired %s failures: %w", state, err)
	}
	groupIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, 0, fmt.Errorf("delete expired %s failures: %w", state, err)
	}
	failures = int64(len(groupIDs))
	groups, err = s.deleteEmptyGroups(ctx, groupIDs)
	return failures, groups, err
}

// deleteEmptyGroups deletes those of the groups that no failure references. A failure that
// arrives for a group meanwhile wins: the foreign key of failure_states refuses the delete, and
// the group stays.
func (s *Store) deleteEmptyGroups(ctx context.Context, ids []int64) (int64, error) {
	ids = uniqueInt64(ids)
	if len(ids) == 0 {
		return 0, nil
	}
	const q = `DELETE FROM failure_groups g
		WHERE g.id = ANY($1) AND NOT EXISTS (SELECT 1 FROM failure_states f WHERE f.group_id = g.id)`
	tag, err := s.pool.Exec(ctx, q, ids)
	if err == nil {
		return tag.RowsAffected(), nil
	}
	if !isFKViolation(err) {
		return 0, fmt.Errorf("delete empty groups: %w", err)
	}
	// A failure was added to one of them concurrently: go one by one.
	var n int64
	for _, id := range ids {
		tag, err := s.pool.Exec(ctx, q, []int64{id})
		switch {
		case err == nil:
			n += tag.RowsAffected()
		case isFKViolation(err):
		default:
			return n, fmt.Errorf("delete empty group %d: %w", id, err)
		}
	}
	return n, nil
}

func isFKViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

func uniqueInt64(in []int64) []int64 {
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
