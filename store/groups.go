package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/redrive/redrive"
)

// GroupListParams selects a page of groups, most recently seen first.
type GroupListParams struct {
	Filter GroupFilter
	// After, when set, starts the page after this position.
	After *GroupPosition
	// Limit is the page size, 1 to MaxListLimit.
	Limit int
}

const groupColumns = `g.id, g.publisher_service, g.message_type, g.error_code, g.stack_trace_hash,
	g.ticket, g.note, g.first_seen, g.last_seen`

// groupCounts counts a group's open failures through the (group_id, state, …) index of
// failure_not_resent and all of them through the (group_id, …) index of the states.
const groupCounts = `CROSS JOIN LATERAL (
		SELECT (SELECT count(*) FROM failure_not_resent o
			WHERE o.group_id = g.id AND o.state IN ('RETRY_PENDING', 'PERMANENT')) AS open_count,
			(SELECT count(*) FROM failure_states f WHERE f.group_id = g.id) AS total_count) c`

func scanGroup(row pgx.Row) (*Group, error) {
	var g Group
	err := row.Scan(&g.ID, &g.PublisherService, &g.MessageType, &g.ErrorCode, &g.StackTraceHash,
		&g.Ticket, &g.Note, &g.FirstSeen, &g.LastSeen, &g.OpenCount, &g.TotalCount)
	return &g, err
}

// ListGroups returns one page of the groups that p selects, most recently seen first, with the
// counts of their open (RETRY_PENDING or PERMANENT) and all failures, and whether more groups
// follow the page.
func (s *Store) ListGroups(ctx context.Context, p GroupListParams) ([]Group, bool, error) {
	if p.Limit < 1 || p.Limit > MaxListLimit {
		return nil, false, &FilterError{Field: "limit", Detail: fmt.Sprintf("%d is not between 1 and %d", p.Limit, MaxListLimit)}
	}
	var (
		args  sqlArgs
		conds []string
	)
	for _, eq := range []struct{ field, column, value string }{
		{"publisher_service", "g.publisher_service", p.Filter.PublisherService},
		{"message_type", "g.message_type", p.Filter.MessageType},
		{"error_code", "g.error_code", p.Filter.ErrorCode},
		{"ticket", "g.ticket", p.Filter.Ticket},
	} {
		if eq.value == "" {
			continue
		}
		if err := redrive.CheckFilterText(eq.field, eq.value, redrive.MaxFilterText); err != nil {
			return nil, false, err
		}
		conds = append(conds, eq.column+" = "+args.add(eq.value))
	}
	if p.Filter.OpenOnly {
		conds = append(conds, `EXISTS (SELECT 1 FROM failure_not_resent o WHERE o.group_id = g.id AND o.state IN ('RETRY_PENDING', 'PERMANENT'))`)
	}
	if p.After != nil {
		conds = append(conds, fmt.Sprintf("(g.last_seen, g.id) < (%s, %s)", args.add(p.After.LastSeen), args.add(p.After.ID)))
	}
	q := "SELECT " + groupColumns + ", c.open_count, c.total_count FROM (SELECT * FROM failure_groups g" +
		whereClause(conds) + " ORDER BY g.last_seen DESC, g.id DESC LIMIT " + args.add(p.Limit+1) + ") g " +
		groupCounts + " ORDER BY g.last_seen DESC, g.id DESC"
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list groups: %w", err)
	}
	defer rows.Close()
	out := []Group{}
	for rows.Next() {
		g, err := scanGroup(rows)
		if err != nil {
			return nil, false, fmt.Errorf("list groups: %w", err)
		}
		out = append(out, *g)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list groups: %w", err)
	}
	if len(out) > p.Limit {
		return out[:p.Limit], true, nil
	}
	return out, false, nil
}

// GroupByID returns the group with id and its counts, or ErrNotFound.
func (s *Store) GroupByID(ctx context.Context, id int64) (*Group, error) {
	g, err := scanGroup(s.pool.QueryRow(ctx, "SELECT "+groupColumns+", c.open_count, c.total_count FROM failure_groups g "+
		groupCounts+" WHERE g.id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get group: %w", err)
	}
	return g, nil
}

// UpdateGroup applies patch to the group with id and writes an audit log entry (action
// group_update) with the principal and the old and new values, in one transaction. It returns
// the updated group, or ErrNotFound.
func (s *Store) UpdateGroup(ctx context.Context, id int64, patch GroupPatch, principal string) (*Group, error) {
	if principal == "" {
		return nil, errors.New("update group: a principal is required")
	}
	for _, f := range []struct {
		field string
		value *string
		limit int
	}{{"ticket", patch.Ticket, MaxTicketLen}, {"note", patch.Note, MaxNoteLen}} {
		if f.value != nil {
			if err := redrive.CheckFilterText(f.field, *f.value, 4*f.limit); err != nil {
				return nil, err
			}
		}
	}
	now := s.now()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var oldTicket, oldNote *string
		err := tx.QueryRow(ctx, `SELECT ticket, note FROM failure_groups WHERE id = $1 FOR UPDATE`, id).Scan(&oldTicket, &oldNote)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		details := map[string]any{}
		if patch.SetTicket {
			details["ticket"] = map[string]any{"from": oldTicket, "to": patch.Ticket}
		}
		if patch.SetNote {
			details["note"] = map[string]any{"from": oldNote, "to": patch.Note}
		}
		if _, err := tx.Exec(ctx, `
			UPDATE failure_groups SET
				ticket = CASE WHEN $2 THEN $3 ELSE ticket END,
				note = CASE WHEN $4 THEN $5 ELSE note END,
				updated_at = $6
			WHERE id = $1`, id, patch.SetTicket, patch.Ticket, patch.SetNote, patch.Note, now); err != nil {
			return err
		}
		return writeAudit(ctx, tx, []AuditEntry{{GroupID: &id, Action: AuditActionGroupUpdate, Principal: principal, Details: details, At: now}})
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("update group: %w", err)
	}
	return s.GroupByID(ctx, id)
}

// GroupAudit returns the audit entries of the group with id, oldest first, at most limit.
func (s *Store) GroupAudit(ctx context.Context, id int64, limit int) ([]AuditEntry, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, failure_id, group_id, action, principal, reason, details, at
		FROM audit_log WHERE group_id = $1 ORDER BY at, id LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("group audit: %w", err)
	}
	out, err := scanAudit(rows)
	if err != nil {
		return nil, fmt.Errorf("group audit: %w", err)
	}
	return out, nil
}
