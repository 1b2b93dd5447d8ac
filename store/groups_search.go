package store

import (
	"context"
	"fmt"
)

// GroupSearchParams selects a page of groups, most recently seen first.
type GroupSearchParams struct {
	Search GroupSearch
	// After, when set, starts the page after this position.
	After *GroupPosition
	// Limit is the page size, 1 to MaxListLimit.
	Limit int
}

// SearchGroups returns one page of the groups that p selects, most recently seen first, with
// their open and total counts and a sample error message, and whether more groups follow.
// The sample is read through the (group_id, created_at, id) index, one row per group.
func (s *Store) SearchGroups(ctx context.Context, p GroupSearchParams) ([]GroupSummary, bool, error) {
	if p.Limit < 1 || p.Limit > MaxListLimit {
		return nil, false, &FilterError{Field: "limit", Detail: fmt.Sprintf("%d is not between 1 and %d", p.Limit, MaxListLimit)}
	}
	if err := p.Search.Validate(); err != nil {
		return nil, false, err
	}
	var (
		args  sqlArgs
		conds []string
		f     = p.Search
	)
	for _, eq := range []struct{ column, value string }{
		{"g.publisher_service", f.PublisherService}, {"g.message_type", f.MessageType},
		{"g.error_code", f.ErrorCode}, {"g.ticket", f.Ticket},
	} {
		if eq.value != "" {
			conds = append(conds, eq.column+" = "+args.add(eq.value))
		}
	}
	if f.NoTicket {
		conds = append(conds, "g.ticket IS NULL")
	}
	if !f.LastSeenFrom.IsZero() {
		conds = append(conds, "g.last_seen >= "+args.add(f.LastSeenFrom))
	}
	if !f.LastSeenTo.IsZero() {
		conds = append(conds, "g.last_seen < "+args.add(f.LastSeenTo))
	}
	if f.OpenOnly {
		conds = append(conds, `EXISTS (SELECT 1 FROM failure_not_resent o WHERE o.group_id = g.id AND o.state IN ('RETRY_PENDING', 'PERMANENT'))`)
	}
	if p.After != nil {
		conds = append(conds, fmt.Sprintf("(g.last_seen, g.id) < (%s, %s)", args.add(p.After.LastSeen), args.add(p.After.ID)))
	}
	q := "SELECT " + groupColumns + ", c.open_count, c.total_count, coalesce(m.error_message, '') FROM (SELECT * FROM failure_groups g" +
		whereClause(conds) + " ORDER BY g.last_seen DESC, g.id DESC LIMIT " + args.add(p.Limit+1) + ") g " +
		groupCounts + ` LEFT JOIN LATERAL (
			SELECT s.error_message FROM failures s WHERE s.group_id = g.id
			ORDER BY s.created_at DESC, s.id DESC LIMIT 1) m ON true
		ORDER BY g.last_seen DESC, g.id DESC`
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("search groups: %w", err)
	}
	defer rows.Close()
	out := []GroupSummary{}
	for rows.Next() {
		var g GroupSummary
		if err := rows.Scan(&g.ID, &g.PublisherService, &g.MessageType, &g.ErrorCode, &g.StackTraceHash,
			&g.Ticket, &g.Note, &g.FirstSeen, &g.LastSeen, &g.OpenCount, &g.TotalCount, &g.SampleMessage); err != nil {
			return nil, false, fmt.Errorf("search groups: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("search groups: %w", err)
	}
	if len(out) > p.Limit {
		return out[:p.Limit], true, nil
	}
	return out, false, nil
}
