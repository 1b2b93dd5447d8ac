package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// StartReactivationParams starts a reactivation run.
type StartReactivationParams struct {
	// Topic is the dead-letter topic. Required.
	Topic string
	// Cluster is the Kafka cluster of the topic. Defaults to DefaultCluster.
	Cluster string
	// Principal started the run; Reason says why (optional). Both go to the audit log.
	Principal string
	Reason    string
	// Limit bounds the records read (> 0), unless UpToNow.
	Limit   int64
	UpToNow bool
	// StaleAfter is how long a RUNNING run may go without progress before a new start marks it
	// INTERRUPTED (its service died). Required (> 0).
	StaleAfter time.Duration
}

// StartReactivation records a new RUNNING run of p.Topic and its audit entry, in one
// transaction, and returns it with the positions where the previous runs stopped (the next
// offset per partition; a partition never read is absent). A RUNNING run without progress for
// StaleAfter is marked INTERRUPTED first; another RUNNING run makes it return
// ErrReactivationRunning.
func (s *Store) StartReactivation(ctx context.Context, p StartReactivationParams) (*Reactivation, map[int32]int64, error) {
	switch {
	case p.Topic == "":
		return nil, nil, errors.New("start reactivation: a topic is required")
	case p.Principal == "":
		return nil, nil, errors.New("start reactivation: a principal is required")
	case !p.UpToNow && p.Limit <= 0:
		return nil, nil, errors.New("start reactivation: a limit > 0 or up to now is required")
	case p.StaleAfter <= 0:
		return nil, nil, errors.New("start reactivation: StaleAfter is required")
	}
	if p.Cluster == "" {
		p.Cluster = DefaultCluster
	}
	now := s.now()
	var limit *int64
	if !p.UpToNow {
		limit = &p.Limit
	}
	var reason *string
	if p.Reason != "" {
		reason = &p.Reason
	}
	var r *Reactivation
	var positions map[int32]int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			UPDATE dlt_reactivations SET state = 'INTERRUPTED', finished_at = $2, updated_at = $2,
				error = 'no progress for ' || $3::text
			WHERE topic = $1 AND cluster = $5 AND state = 'RUNNING' AND updated_at < $4`,
			p.Topic, now, p.StaleAfter.String(), now.Add(-p.StaleAfter), p.Cluster); err != nil {
			return fmt.Errorf("interrupt stale runs: %w", err)
		}
		var err error
		r, err = scanReactivation(tx.QueryRow(ctx, `
			INSERT INTO dlt_reactivations (topic, principal, reason, record_limit, up_to_now, state, started_at, updated_at, cluster)
			VALUES ($1, $2, $3, $4, $5, 'RUNNING', $6, $6, $7)
			RETURNING `+reactivationColumns, p.Topic, p.Principal, reason, limit, p.UpToNow, now, p.Cluster))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "dlt_reactivations_running_key" {
			return ErrReactivationRunning
		}
		if err != nil {
			return fmt.Errorf("insert run: %w", err)
		}
		if positions, err = reactivationPositions(ctx, tx, p.Cluster, p.Topic); err != nil {
			return err
		}
		return writeAudit(ctx, tx, []AuditEntry{{Action: AuditActionReactivateStart, Principal: p.Principal, Reason: reason, At: now,
			Details: map[string]any{"reactivation_id": strconv.FormatInt(r.ID, 10), "topic": p.Topic, "cluster": p.Cluster, "limit": limit, "up_to_now": p.UpToNow,
				"from": positionDetails(positions)}}})
	})
	if errors.Is(err, ErrReactivationRunning) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, fmt.Errorf("start reactivation: %w", err)
	}
	return r, positions, nil
}

// RecordReactivationStep adds a step's counts to a RUNNING run and moves its topic's
// positions, in one transaction. Call it after the step's failures are stored: a run that
// stops between the two reads the step's records again, and stores them as duplicates. It
// returns ErrNotFound when the run is not RUNNING (a later start marked it INTERRUPTED).
func (s *Store) RecordReactivationStep(ctx context.Context, st ReactivationStep) error {
	now := s.now()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var topic, cluster string
		err := tx.QueryRow(ctx, `
			UPDATE dlt_reactivations SET read_count = read_count + $2, reingested = reingested + $3,
				duplicates = duplicates + $4, still_failing = still_failing + $5, updated_at = $6
			WHERE id = $1 AND state = 'RUNNING' RETURNING topic, cluster`,
			st.ID, st.Read, st.Reingested, st.Duplicates, st.StillFailing, now).Scan(&topic, &cluster)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if len(st.Positions) == 0 {
			return nil
		}
		parts := make([]int32, 0, len(st.Positions))
		offsets := make([]int64, 0, len(st.Positions))
		for p, o := range st.Positions {
			parts = append(parts, p)
			offsets = append(offsets, o)
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO dlt_reactivation_positions (topic, partition, next_offset, updated_at, cluster)
			SELECT $1, u.p, u.o, $4, $5 FROM unnest($2::int[], $3::bigint[]) AS u(p, o)
			ON CONFLICT (cluster, topic, partition) DO UPDATE
				SET next_offset = GREATEST(dlt_reactivation_positions.next_offset, EXCLUDED.next_offset), updated_at = $4`,
			topic, parts, offsets, now, cluster)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("record reactivation step: %w", err)
	}
	return nil
}

// FinishReactivation ends a RUNNING run in state (DONE, FAILED or INTERRUPTED), with errText
// for a FAILED one, and writes the audit entry of its outcome, in one transaction. It returns
// ErrNotFound when the run is not RUNNING.
func (s *Store) FinishReactivation(ctx context.Context, id int64, state ReactivationState, errText string) (*Reactivation, error) {
	if state != ReactivationDone && state != ReactivationFailed && state != ReactivationInterrupted {
		return nil, fmt.Errorf("finish reactivation: %q is not a final state", state)
	}
	var errp *string
	if errText != "" {
		errp = &errText
	}
	now := s.now()
	var r *Reactivation
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		r, err = scanReactivation(tx.QueryRow(ctx, `
			UPDATE dlt_reactivations SET state = $2, error = $3, finished_at = $4, updated_at = $4
			WHERE id = $1 AND state = 'RUNNING' RETURNING `+reactivationColumns, id, string(state), errp, now))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return writeAudit(ctx, tx, []AuditEntry{{Action: AuditActionReactivateEnd, Principal: r.Principal, Reason: r.Reason, At: now,
			Details: map[string]any{"reactivation_id": strconv.FormatInt(r.ID, 10), "topic": r.Topic, "state": string(state), "error": errp,
				"read": r.Read, "reingested": r.Reingested, "duplicates": r.Duplicates, "still_failing": r.StillFailing}}})
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("finish reactivation: %w", err)
	}
	return r, nil
}

// ReactivationByID returns the run with id, or ErrNotFound.
func (s *Store) ReactivationByID(ctx context.Context, id int64) (*Reactivation, error) {
	r, err := scanReactivation(s.pool.QueryRow(ctx, `SELECT `+reactivationColumns+` FROM dlt_reactivations WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get reactivation: %w", err)
	}
	return r, nil
}

// ListReactivations returns the runs of topic (of every topic when topic is "") older than the
// run before (all when before is 0), newest first, at most limit, and whether there are more.
func (s *Store) ListReactivations(ctx context.Context, topic string, before int64, limit int) ([]Reactivation, bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+reactivationColumns+` FROM dlt_reactivations
		WHERE ($1 = '' OR topic = $1) AND ($2::bigint = 0 OR id < $2) ORDER BY id DESC LIMIT $3`, topic, before, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list reactivations: %w", err)
	}
	defer rows.Close()
	out := []Reactivation{}
	for rows.Next() {
		r, err := scanReactivation(rows)
		if err != nil {
			return nil, false, fmt.Errorf("list reactivations: %w", err)
		}
		out = append(out, *r)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list reactivations: %w", err)
	}
	out, more := pageRows(out, limit)
	return out, more, nil
}

// ReactivationPositions returns the next offset per partition of topic on the DefaultCluster
// where the next run starts; a partition never read is absent.
func (s *Store) ReactivationPositions(ctx context.Context, topic string) (map[int32]int64, error) {
	return s.ClusterReactivationPositions(ctx, DefaultCluster, topic)
}

// ClusterReactivationPositions is ReactivationPositions for the topic of a cluster.
func (s *Store) ClusterReactivationPositions(ctx context.Context, cluster, topic string) (map[int32]int64, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("reactivation positions: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return reactivationPositions(ctx, tx, cluster, topic)
}

// ReactivationAudit returns the audit entries of the run with id, oldest first.
func (s *Store) ReactivationAudit(ctx context.Context, id int64) ([]AuditEntry, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, failure_id, group_id, action, principal, reason, details, at
		FROM audit_log WHERE action = ANY($1) AND details->>'reactivation_id' = $2 ORDER BY at, id`,
		[]string{AuditActionReactivateStart, AuditActionReactivateEnd}, strconv.FormatInt(id, 10))
	if err != nil {
		return nil, fmt.Errorf("reactivation audit: %w", err)
	}
	out, err := scanAudit(rows)
	if err != nil {
		return nil, fmt.Errorf("reactivation audit: %w", err)
	}
	return out, nil
}

func reactivationPositions(ctx context.Context, tx pgx.Tx, cluster, topic string) (map[int32]int64, error) {
	rows, err := tx.Query(ctx, `SELECT partition, next_offset FROM dlt_reactivation_positions WHERE topic = $1 AND cluster = $2`, topic, cluster)
	if err != nil {
		return nil, fmt.Errorf("reactivation positions: %w", err)
	}
	defer rows.Close()
	out := map[int32]int64{}
	for rows.Next() {
		var p int32
		var o int64
		if err := rows.Scan(&p, &o); err != nil {
			return nil, fmt.Errorf("reactivation positions: %w", err)
		}
		out[p] = o
	}
	return out, rows.Err()
}

// positionDetails renders positions for the audit log (JSON object keys are strings).
func positionDetails(ps map[int32]int64) map[string]int64 {
	out := make(map[string]int64, len(ps))
	for p, o := range ps {
		out[strconv.FormatInt(int64(p), 10)] = o
	}
	return out
}

const reactivationColumns = `id, topic, principal, reason, record_limit, up_to_now, state, read_count, reingested,
	duplicates, still_failing, error, started_at, updated_at, finished_at, cluster`

func scanReactivation(row pgx.Row) (*Reactivation, error) {
	var r Reactivation
	err := row.Scan(&r.ID, &r.Topic, &r.Principal, &r.Reason, &r.Limit, &r.UpToNow, &r.State, &r.Read, &r.Reingested,
		&r.Duplicates, &r.StillFailing, &r.Error, &r.StartedAt, &r.UpdatedAt, &r.FinishedAt, &r.Cluster)
	if err != nil {
		return nil, err
	}
	return &r, nil
}
