package operator

import (
	"context"
	"net/url"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/store"
)

// Parameters of a group search beyond GroupFilterParams.
const (
	ParamLastSeenFrom = "last_seen_from" // groups last seen at or after (RFC 3339, or 2006-01-02T15:04 in UTC)
	ParamLastSeenTo   = "last_seen_to"   // groups last seen before
)

// GroupSearchParams lists the parameters of a group search, in the order GroupSearchValues
// writes them.
var GroupSearchParams = []string{ParamPublisherSvc, ParamMessageType, ParamErrorCode, ParamTicket, ParamNoTicket,
	ParamOpen, ParamLastSeenFrom, ParamLastSeenTo}

// ParseGroupSearch reads a group search from URL values: the criteria of ParseGroupFilter, and
// no_ticket and the last_seen_from/last_seen_to range. The error is an *InputError.
func ParseGroupSearch(v url.Values) (redrive.GroupSearch, error) {
	gf, err := ParseGroupFilter(v)
	if err != nil {
		return redrive.GroupSearch{}, err
	}
	s := redrive.GroupSearch{GroupFilter: gf}
	if s.NoTicket, err = parseBool(v, ParamNoTicket); err != nil {
		return redrive.GroupSearch{}, err
	}
	if s.LastSeenFrom, err = parseTime(ParamLastSeenFrom, v.Get(ParamLastSeenFrom)); err != nil {
		return redrive.GroupSearch{}, err
	}
	if s.LastSeenTo, err = parseTime(ParamLastSeenTo, v.Get(ParamLastSeenTo)); err != nil {
		return redrive.GroupSearch{}, err
	}
	if err := s.Validate(); err != nil {
		return redrive.GroupSearch{}, fromStore(err)
	}
	return s, nil
}

// GroupSearchValues returns the URL form of s, which ParseGroupSearch reads back.
func GroupSearchValues(s redrive.GroupSearch) url.Values {
	v := url.Values{}
	for _, p := range []struct{ name, value string }{
		{ParamPublisherSvc, s.PublisherService}, {ParamMessageType, s.MessageType},
		{ParamErrorCode, s.ErrorCode}, {ParamTicket, s.Ticket},
	} {
		if p.value != "" {
			v.Set(p.name, p.value)
		}
	}
	if s.NoTicket {
		v.Set(ParamNoTicket, "true")
	}
	if s.OpenOnly {
		v.Set(ParamOpen, "true")
	}
	if !s.LastSeenFrom.IsZero() {
		v.Set(ParamLastSeenFrom, s.LastSeenFrom.UTC().Format(time.RFC3339Nano))
	}
	if !s.LastSeenTo.IsZero() {
		v.Set(ParamLastSeenTo, s.LastSeenTo.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// GroupSearchRequest selects a page of groups, most recently seen first.
type GroupSearchRequest struct {
	Search redrive.GroupSearch
	// Limit is the page size, 1 to redrive.MaxListLimit. Defaults to 50.
	Limit int
	// Cursor is the Next of the previous page; empty for the first.
	Cursor string
}

// GroupSearchPage is one page of a group search.
type GroupSearchPage struct {
	Items []redrive.GroupSummary
	// Next is the cursor of the following page; empty on the last page.
	Next string
}

// SearchGroups returns one page of the groups req selects, with their counts and a sample
// error message each. Bad criteria or cursors are an *InputError.
func (c *Core) SearchGroups(ctx context.Context, req GroupSearchRequest) (*GroupSearchPage, error) {
	limit, err := pageLimit(req.Limit)
	if err != nil {
		return nil, err
	}
	p := store.GroupSearchParams{Search: req.Search, Limit: limit}
	if req.Cursor != "" {
		if p.After, err = decodeGroupCursor(req.Cursor); err != nil {
			return nil, err
		}
	}
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	groups, more, err := c.store.SearchGroups(ctx, p)
	if err != nil {
		return nil, fromStore(err)
	}
	page := &GroupSearchPage{Items: groups}
	if more && len(groups) > 0 {
		page.Next = encodeGroupCursor(groups[len(groups)-1].Position())
	}
	return page, nil
}

// GroupPageRequest asks for a group with one page of its failures.
type GroupPageRequest struct {
	ID int64
	// Limit and Cursor page the group's failures, newest first (as ListRequest).
	Limit  int
	Cursor string
	// Total asks for the number of the group's failures, counted up to TotalCap.
	Total bool
}

// GroupPageView is a group with its audit entries and one page of its failures.
type GroupPageView struct {
	*GroupView
	Failures *FailurePage
}

// GroupPage returns the group req names with its audit and a page of its failures, newest
// first; an unknown id wraps redrive.ErrNotFound, a bad cursor is an *InputError.
func (c *Core) GroupPage(ctx context.Context, req GroupPageRequest) (*GroupPageView, error) {
	if req.ID < 1 {
		return nil, invalid(ParamGroupID, "%d is not a group id (a positive integer)", req.ID)
	}
	g, err := c.Group(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	fp, err := c.ListFailures(ctx, ListRequest{Filter: redrive.Filter{GroupID: req.ID}, Order: redrive.NewestFirst,
		Limit: req.Limit, Cursor: req.Cursor, Total: req.Total})
	if err != nil {
		return nil, err
	}
	return &GroupPageView{GroupView: g, Failures: fp}, nil
}
