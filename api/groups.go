package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/store"
)

// groupJSON is a failure group with its counts.
type groupJSON struct {
	ID               int64     `json:"id"`
	PublisherService string    `json:"publisher_service"`
	MessageType      string    `json:"message_type"`
	ErrorCode        string    `json:"error_code"`
	StackTraceHash   string    `json:"stack_trace_hash"`
	Ticket           *string   `json:"ticket"`
	Note             *string   `json:"note"`
	FirstSeen        time.Time `json:"first_seen"`
	LastSeen         time.Time `json:"last_seen"`
	// OpenCount counts the group's RETRY_PENDING and PERMANENT failures.
	OpenCount  int64 `json:"open_count"`
	TotalCount int64 `json:"total_count"`
}

func newGroupJSON(g *store.Group) groupJSON {
	return groupJSON{ID: g.ID, PublisherService: g.PublisherService, MessageType: g.MessageType,
		ErrorCode: g.ErrorCode, StackTraceHash: g.StackTraceHash, Ticket: g.Ticket, Note: g.Note,
		FirstSeen: g.FirstSeen, LastSeen: g.LastSeen, OpenCount: g.OpenCount, TotalCount: g.TotalCount}
}

// groupDetail is a group with its audit entries.
type groupDetail struct {
	groupJSON
	Audit []auditJSON `json:"audit"`
}

// listGroups serves GET /groups.
func (a *api) listGroups(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, nil, []string{"publisher_service", "message_type", "error_code", "ticket", "open", "limit", "cursor"})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	limit, err := parseLimit(q, defaultPageSize)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p := store.GroupListParams{
		Filter: store.GroupFilter{
			PublisherService: q.Get("publisher_service"),
			MessageType:      q.Get("message_type"),
			ErrorCode:        q.Get("error_code"),
			Ticket:           q.Get("ticket"),
		},
		Limit: limit,
	}
	if s := q.Get("open"); s != "" {
		open, err := strconv.ParseBool(s)
		if err != nil {
			a.fail(w, r, badRequest("open", "%q is not true or false", truncate(s, 20)))
			return
		}
		p.Filter.OpenOnly = open
	}
	if c := q.Get("cursor"); c != "" {
		if p.After, err = decodeGroupCursor(c); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	ctx, cancel := a.queryContext(r)
	defer cancel()
	groups, more, err := a.store.ListGroups(ctx, p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	resp := page[groupJSON]{Data: make([]groupJSON, len(groups))}
	for i := range groups {
		resp.Data[i] = newGroupJSON(&groups[i])
	}
	if more {
		c := encodeGroupCursor(groups[len(groups)-1].Position())
		resp.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, resp)
}

// getGroup serves GET /groups/{id}.
func (a *api) getGroup(w http.ResponseWriter, r *http.Request) {
	id, err := pathGroupID(r)
	if err == nil {
		_, err = parseQuery(r, nil)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ctx, cancel := a.queryContext(r)
	defer cancel()
	g, err := a.store.GroupByID(ctx, id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	audit, err := a.store.GroupAudit(ctx, id, maxAudit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, groupDetail{groupJSON: newGroupJSON(g), Audit: auditListJSON(audit)})
}

// groupPatchBody is the body of PATCH /groups/{id}: a member that is absent is kept, null
// clears it.
type groupPatchBody struct {
	Ticket optionalString `json:"ticket"`
	Note   optionalString `json:"note"`
}

// patchGroup serves PATCH /groups/{id}.
func (a *api) patchGroup(w http.ResponseWriter, r *http.Request) {
	id, err := pathGroupID(r)
	if err == nil {
		_, err = parseQuery(r, nil)
	}
	var body groupPatchBody
	if err == nil {
		err = a.decodeBody(w, r, &body, false)
	}
	if err == nil && !body.Ticket.Set && !body.Note.Set {
		err = badRequest("body", "give ticket, note or both")
	}
	if err == nil {
		err = checkGroupText("ticket", body.Ticket.Value, store.MaxTicketLen)
	}
	if err == nil {
		err = checkGroupText("note", body.Note.Value, store.MaxNoteLen)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	patch := store.GroupPatch{SetTicket: body.Ticket.Set, Ticket: emptyToNil(body.Ticket.Value),
		SetNote: body.Note.Set, Note: emptyToNil(body.Note.Value)}
	ctx, cancel := a.actionContext(r)
	defer cancel()
	g, err := a.store.UpdateGroup(ctx, id, patch, principal(r).Name)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newGroupJSON(g))
}

func checkGroupText(field string, v *string, limit int) error {
	if v == nil {
		return nil
	}
	switch n := utf8.RuneCountInString(*v); {
	case !utf8.ValidString(*v):
		return badRequest(field, "not valid UTF-8")
	case n > limit:
		return badRequest(field, "%d characters, at most %d", n, limit)
	case strings.IndexByte(*v, 0) >= 0:
		return badRequest(field, "contains a NUL character")
	}
	return nil
}

// emptyToNil treats an empty or blank string as clearing the field.
func emptyToNil(v *string) *string {
	if v == nil || strings.TrimSpace(*v) == "" {
		return nil
	}
	s := strings.TrimSpace(*v)
	return &s
}
