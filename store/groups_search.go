package store

import (
	"context"
	"fmt"
	"time"
)

// GroupSearch selects groups for the group pages: a GroupFilter and the criteria that only
// those pages need. A zero field does not restrict.
type GroupSearch struct {
	GroupFilter
	// NoTicket keeps groups without a ticket; it cannot be combined with Ticket.
	NoTicket bool
	// LastSeenFrom keeps groups last seen at or after it; LastSeenTo those last seen before it.
	LastSeenFrom, LastSeenTo time.Time
}

// Validate checks s: text criteria that are too long, not UTF-8 or hold a NUL, a ticket with
// NoTicket, and an empty time range are a *FilterError.
func (s GroupSearch) Validate() error {
	for _, eq := range []struct{ field, value string }{
		{"publisher_service", s.PublisherService}, {"message_type", s.MessageType},
		{"error_code", s.ErrorCode}, {"ticket", s.Ticket},
	} {
		if err := checkFilterText(eq.field, eq.value, maxFilterText); err != nil {
			return err
		}
	}
	if s.NoTicket && s.Ticket != "" {
		return &FilterError{Field: "no_ticket", Detail: "give ticket or no_ticket, not both"}
	}
	if !s.LastSeenFrom.IsZero() && !s.LastSeenTo.IsZero() && !s.LastSeenFrom.Before(s.LastSeenTo) {
		return &FilterError{Field: "last_seen_to", Detail: "the range is empty: last_seen_to is not after last_seen_from"}
	}
	return nil
}

// GroupSummary is a group of a group page: the group with its counts, and the error message
// of its most recent failure as a sample of what its failures say.
type GroupSummary struct {
	Group
	// SampleMessage is the error message of the group's most recent failure; "" when the
	// group has none left (retention removed them).
	SampleMessage string
}

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
		conds = append(conds, `EXISTS (SELECT 1 FROM failure_states o WHERE o.group_id = g.id AND o.state IN ('RETRY_PENDING', 'PERMANENT'))`)
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
