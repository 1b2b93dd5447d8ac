package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnqueueNotifications stores notifications that do not exist yet (by webhook and dedupe key)
// and returns how many it stored: each event is notified once per webhook, however many
// instances detect it.
func (s *Store) EnqueueNotifications(ctx context.Context, ns []Notification) (int64, error) {
	return enqueueNotifications(ctx, s.pool, ns)
}

func enqueueNotifications(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, ns []Notification) (int64, error) {
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
	ct, err := db.Exec(ctx, `
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

// NotifyBuilder turns taken events into notifications; it runs inside the transaction that
// takes them, so an error (or a crash) leaves every event of the page to the next taker.
type NotifyBuilder func(ctx context.Context, events []NotifyEvent) ([]Notification, error)

// RelayNotifyEvents takes up to limit waiting events (oldest first, skipping those another
// instance holds), has build turn them into notifications, and in the same transaction stores
// those (as EnqueueNotifications does) and deletes the events. It returns how many events it
// took: fewer than limit means none are left that no one else holds. Either the whole page
// becomes notifications or nothing changes: an instance that dies mid-batch leaves its events
// to the others, whatever the number waiting.
func (s *Store) RelayNotifyEvents(ctx context.Context, limit int, build NotifyBuilder) (int, error) {
	taken := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			DELETE FROM notify_events WHERE id IN (
				SELECT id FROM notify_events ORDER BY id FOR UPDATE SKIP LOCKED LIMIT $1)
			RETURNING id, event_type, subject, at`, limit)
		if err != nil {
			return err
		}
		events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NotifyEvent, error) {
			var e NotifyEvent
			return e, r.Scan(&e.ID, &e.EventType, &e.Subject, &e.At)
		})
		if err != nil || len(events) == 0 {
			return err
		}
		slices.SortFunc(events, func(a, b NotifyEvent) int { return cmp.Compare(a.ID, b.ID) })
		if err := loadNotifySubjects(ctx, tx, events); err != nil {
			return err
		}
		ns, err := build(ctx, events)
		if err != nil {
			return err
		}
		if _, err := enqueueNotifications(ctx, tx, ns); err != nil {
			return err
		}
		taken = len(events)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("relay notify events: %w", err)
	}
	return taken, nil
}

// loadNotifySubjects fills each event's subject, three queries at most.
func loadNotifySubjects(ctx context.Context, tx pgx.Tx, events []NotifyEvent) error {
	var groupIDs []int64
	var failureIDs, jobIDs []uuid.UUID
	for _, e := range events {
		switch e.EventType {
		case NotifyEventGroupNew:
			if id, err := strconv.ParseInt(e.Subject, 10, 64); err == nil {
				groupIDs = append(groupIDs, id)
			}
		case NotifyEventFailureExhausted:
			if id, err := uuid.Parse(e.Subject); err == nil {
				failureIDs = append(failureIDs, id)
			}
		case NotifyEventJobFinished:
			if id, err := uuid.Parse(e.Subject); err == nil {
				jobIDs = append(jobIDs, id)
			}
		}
	}
	groups := map[string]*Group{}
	if len(groupIDs) > 0 {
		rows, err := tx.Query(ctx, `SELECT id, publisher_service, message_type, error_code, stack_trace_hash, ticket, note,
			first_seen, last_seen FROM failure_groups WHERE id = ANY($1)`, groupIDs)
		if err != nil {
			return fmt.Errorf("new groups: %w", err)
		}
		gs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Group, error) {
			var g Group
			return g, r.Scan(&g.ID, &g.PublisherService, &g.MessageType, &g.ErrorCode, &g.StackTraceHash, &g.Ticket, &g.Note, &g.FirstSeen, &g.LastSeen)
		})
		if err != nil {
			return fmt.Errorf("new groups: %w", err)
		}
		for i := range gs {
			groups[strconv.FormatInt(gs[i].ID, 10)] = &gs[i]
		}
	}
	failures := map[string]*FailureSummary{}
	if len(failureIDs) > 0 {
		rows, err := tx.Query(ctx, "SELECT "+summaryColumns+" FROM failures f WHERE f.id = ANY($1)", failureIDs)
		if err != nil {
			return fmt.Errorf("exhausted failures: %w", err)
		}
		fs, err := scanSummaries(rows)
		if err != nil {
			return fmt.Errorf("exhausted failures: %w", err)
		}
		for i := range fs {
			failures[fs[i].ID.String()] = &fs[i]
		}
	}
	jobs := map[string]*Job{}
	if len(jobIDs) > 0 {
		rows, err := tx.Query(ctx, "SELECT "+jobColumns+" FROM jobs WHERE id = ANY($1)", jobIDs)
		if err != nil {
			return fmt.Errorf("finished jobs: %w", err)
		}
		js, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Job, error) { return scanJob(r) })
		if err != nil {
			return fmt.Errorf("finished jobs: %w", err)
		}
		for _, j := range js {
			jobs[j.ID.String()] = j
		}
	}
	for i := range events {
		e := &events[i]
		switch e.EventType {
		case NotifyEventGroupNew:
			e.Group = groups[e.Subject]
		case NotifyEventFailureExhausted:
			e.Failure = failures[strings.ToLower(e.Subject)]
		case NotifyEventJobFinished:
			e.Job = jobs[strings.ToLower(e.Subject)]
		}
	}
	return nil
}

// NotifyEventsWaiting returns how many events wait to become notifications.
func (s *Store) NotifyEventsWaiting(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM notify_events`).Scan(&n); err != nil {
		return 0, fmt.Errorf("notify events waiting: %w", err)
	}
	return n, nil
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
