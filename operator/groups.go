package operator

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/store"
)

// ParamOpen is the group list parameter that keeps only groups with open failures (true);
// the others are shared with the failure filter (ParamTicket, ParamErrorCode, …).
const ParamOpen = "open"

// GroupFilterParams lists the group filter parameters.
var GroupFilterParams = []string{ParamPublisherSvc, ParamMessageType, ParamErrorCode, ParamTicket, ParamOpen}

// ParseGroupFilter reads a group filter from URL values; the error is an *InputError.
func ParseGroupFilter(v url.Values) (redrive.GroupFilter, error) {
	f := redrive.GroupFilter{
		PublisherService: strings.TrimSpace(v.Get(ParamPublisherSvc)),
		MessageType:      strings.TrimSpace(v.Get(ParamMessageType)),
		ErrorCode:        strings.TrimSpace(v.Get(ParamErrorCode)),
		Ticket:           strings.TrimSpace(v.Get(ParamTicket)),
	}
	for name, s := range map[string]string{ParamPublisherSvc: f.PublisherService, ParamMessageType: f.MessageType,
		ParamErrorCode: f.ErrorCode, ParamTicket: f.Ticket} {
		if _, err := CheckText(name, s, 1000); err != nil {
			return redrive.GroupFilter{}, err
		}
	}
	open, err := parseBool(v, ParamOpen)
	if err != nil {
		return redrive.GroupFilter{}, err
	}
	f.OpenOnly = open
	return f, nil
}

// parseBool reads the boolean parameter param of v; absent is false.
func parseBool(v url.Values, param string) (bool, error) {
	s := v.Get(param)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, invalid(param, "%q is not true or false", clip.Text(s, clip.Default))
	}
	return b, nil
}

// GroupListRequest selects a page of groups, most recently seen first.
type GroupListRequest struct {
	Filter redrive.GroupFilter
	// Limit is the page size, 1 to redrive.MaxListLimit. Defaults to 50.
	Limit int
	// Cursor is the Next of the previous page; empty for the first.
	Cursor string
}

// GroupPage is one page of groups.
type GroupPage struct {
	Items []redrive.Group
	// Next is the cursor of the following page; empty on the last page.
	Next string
}

// ListGroups returns one page of groups with their open and total counts.
func (c *Core) ListGroups(ctx context.Context, req GroupListRequest) (*GroupPage, error) {
	limit, err := pageLimit(req.Limit)
	if err != nil {
		return nil, err
	}
	p := store.GroupListParams{Filter: req.Filter, Limit: limit}
	if req.Cursor != "" {
		after, err := decodeGroupCursor(req.Cursor)
		if err != nil {
			return nil, err
		}
		p.After = after
	}
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	groups, more, err := c.store.ListGroups(ctx, p)
	if err != nil {
		return nil, fromStore(err)
	}
	page := &GroupPage{Items: groups}
	if more && len(groups) > 0 {
		page.Next = encodeGroupCursor(groups[len(groups)-1].Position())
	}
	return page, nil
}

// GroupView is a group with its audit entries, oldest first.
type GroupView struct {
	*redrive.Group
	Audit []redrive.AuditEntry
}

// Group returns the group with id, or an error wrapping redrive.ErrNotFound.
func (c *Core) Group(ctx context.Context, id int64) (*GroupView, error) {
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	g, err := c.store.GroupByID(ctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	audit, err := c.store.GroupAudit(ctx, id, MaxAudit)
	if err != nil {
		return nil, err
	}
	return &GroupView{Group: g, Audit: audit}, nil
}

// GroupUpdate edits a group's operator-set fields: a nil field is kept, an empty (or blank)
// one is cleared.
type GroupUpdate struct {
	Ticket *string
	Note   *string
}

// UpdateGroup applies u to the group with id on behalf of principal. Only what differs from
// the group's current values is changed and audited; an update that changes nothing writes no
// audit entry. Bad text is an *InputError; an unknown id wraps redrive.ErrNotFound.
func (c *Core) UpdateGroup(ctx context.Context, id int64, u GroupUpdate, principal string) (*redrive.Group, error) {
	if u.Ticket == nil && u.Note == nil {
		return nil, invalid("", "give ticket, note or both")
	}
	ticket, note, err := checkGroupText(u)
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.actionContext(ctx)
	defer cancel()
	cur, err := c.store.GroupByID(ctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	var patch redrive.GroupPatch
	if u.Ticket != nil && !sameText(ticket, cur.Ticket) {
		patch.SetTicket, patch.Ticket = true, ticket
	}
	if u.Note != nil && !sameText(note, cur.Note) {
		patch.SetNote, patch.Note = true, note
	}
	if !patch.SetTicket && !patch.SetNote {
		return cur, nil
	}
	g, err := c.store.UpdateGroup(ctx, id, patch, principal)
	return g, fromStore(err)
}

// checkGroupText validates the fields of u and returns them trimmed, nil for empty ones.
func checkGroupText(u GroupUpdate) (ticket, note *string, err error) {
	for _, f := range []struct {
		name  string
		in    *string
		limit int
		out   **string
	}{{ParamTicket, u.Ticket, redrive.MaxTicketLen, &ticket}, {"note", u.Note, redrive.MaxNoteLen, &note}} {
		if f.in == nil {
			continue
		}
		s, err := CheckText(f.name, *f.in, f.limit)
		if err != nil {
			return nil, nil, err
		}
		if s != "" {
			*f.out = &s
		}
	}
	return ticket, note, nil
}

func sameText(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
