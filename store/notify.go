package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notification is one event to tell one webhook, with its delivery state.
type Notification struct {
	ID        int64
	Webhook   string
	EventType string
	// DedupeKey names the event; a webhook gets each key once.
	DedupeKey     string
	Payload       map[string]any
	CreatedAt     time.Time
	NextAttemptAt time.Time
	Attempts      int
	DeliveredAt   *time.Time
	GaveUpAt      *time.Time
	LastError     *string
	// Log lists the delivery attempts, when read by ListNotifications.
	Log []NotifyAttempt
}

// NotifyAttempt is one delivery attempt.
type NotifyAttempt struct {
	Attempt int
	At      time.Time
	// Status is the HTTP status; 0 when no answer came (Error says why).
	Status   int
	Error    string
	Duration time.Duration
}

// EnqueueNotifications stores notifications that do not exist yet (by webhook and dedupe key)
// and returns how many it stored: each event is notified once per webhook, however many
// instances detect it.
func (s *Store) EnqueueNotifications(ctx context.Context, ns []Notification) (int64, error) {
	if len(ns) == 0 {
		return 0, nil
	}
	hooks, types, keys, payloads := make([]string, len(ns)), make([]string, len(ns)), make([]string, len(ns)), make([]string, len(ns))
	at := make([]time.Time, len(ns))
	for i, n := range ns {
		b, err := json.Marshal(n.Payload)
		if err != nil {
			return 0, fmt.Errorf("notification payload: %w", err)
		}
		hooks[i], types[i], keys[i], payloads[i], at[i] = n.Webhook, n.EventType, n.DedupeKey, string(b), n.CreatedAt
	}
	ct, err := s.pool.Exec(ctx, `
		INSERT INTO notify_outbox (webhook, event_type, dedupe_key, payload, created_at, next_attempt_at)
		SELECT w, t, k, p::jsonb, a, a FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS u(w, t, k, p, a)
		ON CONFLICT ON CONSTRAINT notify_outbox_once_key DO NOTHING`, hooks, types, keys, payloads, at)
	if err != nil {
		return 0, fmt.Errorf("enqueue notifications: %w", err)
	}
	return ct.RowsAffected(), nil
}

// ClaimNotifications returns up to limit notifications due at now that are neither delivered
// nor given up, and holds them until holdUntil (no other instance claims them meanwhile).
func (s *Store) ClaimNotifications(ctx context.Context, now, holdUntil time.Time, limit int) ([]Notification, error) {
	rows, err := s.pool.Query(ctx, `
		UPDATE notify_outbox SET next_attempt_at = $2
		WHERE id IN (
			SELECT id FROM notify_outbox
			WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at <= $1
			ORDER BY next_attempt_at, id FOR UPDATE SKIP LOCKED LIMIT $3)
		RETURNING `+notificationColumns, now, holdUntil, limit)
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanNotification)
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	return out, nil
}

const notificationColumns = `id, webhook, event_type, dedupe_key, payload, created_at, next_attempt_at, attempts,
	delivered_at, gave_up_at, last_error`

func scanNotification(r pgx.CollectableRow) (Notification, error) {
	var (
		n       Notification
		payload []byte
	)
	if err := r.Scan(&n.ID, &n.Webhook, &n.EventType, &n.DedupeKey, &payload, &n.CreatedAt, &n.NextAttemptAt,
		&n.Attempts, &n.DeliveredAt, &n.GaveUpAt, &n.LastError); err != nil {
		return n, err
	}
	return n, json.Unmarshal(payload, &n.Payload)
}

// NotifyOutcome is what became of one delivery attempt.
type NotifyOutcome struct {
	Attempt NotifyAttempt
	// Delivered ends the notification as delivered; GiveUp as given up; otherwise it is due
	// again at NextAttemptAt.
	Delivered, GiveUp bool
	NextAttemptAt     time.Time
}

// RecordNotifyAttempt logs an attempt at delivering notification id and sets its state.
func (s *Store) RecordNotifyAttempt(ctx context.Context, id int64, o NotifyOutcome) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		a := o.Attempt
		var status *int
		if a.Status != 0 {
			status = &a.Status
		}
		var errText *string
		if a.Error != "" {
			errText = &a.Error
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO notify_attempts (outbox_id, attempt, at, status, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT DO NOTHING`, id, a.Attempt, a.At, status, errText, a.Duration.Milliseconds()); err != nil {
			return fmt.Errorf("log notification attempt: %w", err)
		}
		_, err := tx.Exec(ctx, `
			UPDATE notify_outbox SET attempts = greatest(attempts, $2), last_error = $3,
				delivered_at = CASE WHEN $4 THEN $5::timestamptz END,
				gave_up_at = CASE WHEN $6 THEN $5::timestamptz END,
				next_attempt_at = CASE WHEN $4 OR $6 THEN next_attempt_at ELSE $7::timestamptz END
			WHERE id = $1`, id, a.Attempt, errText, o.Delivered, a.At, o.GiveUp, o.NextAttemptAt)
		if err != nil {
			return fmt.Errorf("record notification attempt: %w", err)
		}
		return nil
	})
}

// ListNotifications returns up to limit notifications, newest first, with ids below before (0
// for the newest), each with its attempts.
func (s *Store) ListNotifications(ctx context.Context, before int64, limit int) ([]Notification, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+notificationColumns+` FROM notify_outbox
		WHERE $1 = 0 OR id < $1 ORDER BY id DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanNotification)
	if err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	index := map[int64]int{}
	ids := make([]int64, len(out))
	for i, n := range out {
		index[n.ID], ids[i] = i, n.ID
	}
	arows, err := s.pool.Query(ctx, `SELECT outbox_id, attempt, at, coalesce(status, 0), coalesce(error, ''), duration_ms
		FROM notify_attempts WHERE outbox_id = ANY($1) ORDER BY outbox_id, attempt`, ids)
	if err != nil {
		return nil, fmt.Errorf("list notification attempts: %w", err)
	}
	defer arows.Close()
	for arows.Next() {
		var (
			id int64
			a  NotifyAttempt
			ms int64
		)
		if err := arows.Scan(&id, &a.Attempt, &a.At, &a.Status, &a.Error, &ms); err != nil {
			return nil, fmt.Errorf("list notification attempts: %w", err)
		}
		a.Duration = time.Duration(ms) * time.Millisecond
		out[index[id]].Log = append(out[index[id]].Log, a)
	}
	return out, arows.Err()
}

// NotifyWatermark returns where a detector got to; ok is false before its first run.
func (s *Store) NotifyWatermark(ctx context.Context, detector string) (time.Time, bool, error) {
	var at time.Time
	err := s.pool.QueryRow(ctx, `SELECT at FROM notify_watermarks WHERE detector = $1`, detector).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("notify watermark: %w", err)
	}
	return at, true, nil
}

// AdvanceNotifyWatermark moves a detector's watermark to at, never back.
func (s *Store) AdvanceNotifyWatermark(ctx context.Context, detector string, at time.Time) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO notify_watermarks (detector, at) VALUES ($1, $2)
		ON CONFLICT (detector) DO UPDATE SET at = greatest(notify_watermarks.at, excluded.at)`, detector, at)
	if err != nil {
		return fmt.Errorf("advance notify watermark: %w", err)
	}
	return nil
}

// GroupsFirstSeenSince returns up to limit groups first seen after since, oldest first.
func (s *Store) GroupsFirstSeenSince(ctx context.Context, since time.Time, limit int) ([]Group, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, publisher_service, message_type, error_code, stack_trace_hash, ticket, note,
		first_seen, last_seen FROM failure_groups WHERE first_seen > $1 ORDER BY first_seen, id LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("new groups: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Group, error) {
		var g Group
		return g, r.Scan(&g.ID, &g.PublisherService, &g.MessageType, &g.ErrorCode, &g.StackTraceHash, &g.Ticket, &g.Note, &g.FirstSeen, &g.LastSeen)
	})
	if err != nil {
		return nil, fmt.Errorf("new groups: %w", err)
	}
	return out, nil
}

// BusyGroups returns the groups with at least threshold failures stored since since, with the
// count as TotalCount.
func (s *Store) BusyGroups(ctx context.Context, since time.Time, threshold int) ([]Group, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT g.id, g.publisher_service, g.message_type, g.error_code, g.stack_trace_hash, g.ticket, g.note,
			g.first_seen, g.last_seen, c.n
		FROM (SELECT group_id, count(*) AS n FROM failure_states WHERE created_at > $1 GROUP BY group_id HAVING count(*) >= $2) c
		JOIN failure_groups g ON g.id = c.group_id ORDER BY g.id`, since, threshold)
	if err != nil {
		return nil, fmt.Errorf("busy groups: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Group, error) {
		var g Group
		return g, r.Scan(&g.ID, &g.PublisherService, &g.MessageType, &g.ErrorCode, &g.StackTraceHash, &g.Ticket, &g.Note,
			&g.FirstSeen, &g.LastSeen, &g.TotalCount)
	})
	if err != nil {
		return nil, fmt.Errorf("busy groups: %w", err)
	}
	return out, nil
}

// ExhaustedSince returns up to limit failures that became PERMANENT with their retries
// exhausted after since, oldest first.
func (s *Store) ExhaustedSince(ctx context.Context, since time.Time, limit int) ([]FailureSummary, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+summaryColumns+` FROM failures f
		WHERE f.state = 'PERMANENT' AND f.state_reason = $3 AND f.updated_at > $1 ORDER BY f.updated_at, f.id LIMIT $2`,
		since, limit, StateReasonRetriesExhausted)
	if err != nil {
		return nil, fmt.Errorf("exhausted failures: %w", err)
	}
	out, err := scanSummaries(rows)
	if err != nil {
		return nil, fmt.Errorf("exhausted failures: %w", err)
	}
	return out, nil
}

// JobsFinishedSince returns up to limit jobs that finished (DONE or CANCELED) after since.
func (s *Store) JobsFinishedSince(ctx context.Context, since time.Time, limit int) ([]Job, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+jobColumns+` FROM jobs WHERE state IN ('DONE', 'CANCELED') AND finished_at > $1
		ORDER BY finished_at, id LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("finished jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) {
		j, err := scanJob(r)
		if err != nil {
			return Job{}, err
		}
		return *j, nil
	})
	if err != nil {
		return nil, fmt.Errorf("finished jobs: %w", err)
	}
	return out, nil
}
