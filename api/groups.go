package api

import (
	"net/http"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/operator"
)

// groupJSON is a failure group with its counts.
type groupJSON struct {
	ID               int64   `json:"id"`
	PublisherService string  `json:"publisher_service"`
	MessageType      string  `json:"message_type"`
	ErrorCode        string  `json:"error_code"`
	StackTraceHash   string  `json:"stack_trace_hash"`
	Ticket           *string `json:"ticket"`
	// TicketURL is the ticket's address from the configured link template; null without one.
	TicketURL *string   `json:"ticket_url"`
	Note      *string   `json:"note"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// OpenCount counts the group's RETRY_PENDING and PERMANENT failures.
	OpenCount  int64 `json:"open_count"`
	TotalCount int64 `json:"total_count"`
}

func (a *api) newGroupJSON(g *redrive.Group) groupJSON {
	out := groupJSON{ID: g.ID, PublisherService: g.PublisherService, MessageType: g.MessageType,
		ErrorCode: g.ErrorCode, StackTraceHash: g.StackTraceHash, Ticket: g.Ticket, Note: g.Note,
		FirstSeen: g.FirstSeen, LastSeen: g.LastSeen, OpenCount: g.OpenCount, TotalCount: g.TotalCount}
	if g.Ticket != nil {
		if u := a.core.TicketURL(*g.Ticket); u != "" {
			out.TicketURL = &u
		}
	}
	return out
}

// groupDetail is a group with its audit entries.
type groupDetail struct {
	groupJSON
	Audit []auditJSON `json:"audit"`
}

// listGroups serves GET /groups.
func (a *api) listGroups(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, operator.GroupFilterParams, []string{"limit", "cursor"})
	var req operator.GroupListRequest
	if err == nil {
		req.Filter, err = operator.ParseGroupFilter(q)
	}
	if err == nil {
		req.Limit, err = parseLimit(q)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	req.Cursor = q.Get("cursor")
	p, err := a.core.ListGroups(r.Context(), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pageOf(p.Items, a.newGroupJSON, p.Next))
}

// getGroup serves GET /groups/{id}.
func (a *api) getGroup(w http.ResponseWriter, r *http.Request) {
	id, ok := a.intIDOnly(w, r)
	if !ok {
		return
	}
	g, err := a.core.Group(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, groupDetail{groupJSON: a.newGroupJSON(g.Group), Audit: auditListJSON(g.Audit)})
}

// groupPatchBody is the body of PATCH /groups/{id}: a member that is absent is kept; null or
// an empty string clears it.
type groupPatchBody struct {
	Ticket optionalString `json:"ticket"`
	Note   optionalString `json:"note"`
}

// patchGroup serves PATCH /groups/{id}.
func (a *api) patchGroup(w http.ResponseWriter, r *http.Request) {
	id, err := pathGroupID(r)
	if err == nil {
		_, err = parseQuery(r)
	}
	var body groupPatchBody
	if err == nil {
		err = a.decodeBody(w, r, &body, false)
	}
	if err == nil && !body.Ticket.Set && !body.Note.Set {
		err = badRequest("body", "give ticket, note or both")
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var u operator.GroupUpdate
	for _, f := range []struct {
		in  optionalString
		out **string
	}{{body.Ticket, &u.Ticket}, {body.Note, &u.Note}} {
		if f.in.Set {
			v := ""
			if f.in.Value != nil {
				v = *f.in.Value
			}
			*f.out = &v
		}
	}
	g, err := a.core.UpdateGroup(r.Context(), id, u, principal(r).Name)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a.newGroupJSON(g))
}

// openTicket serves POST /groups/{id}/ticket: open an issue in the tracker for the group and
// store its key as the group's ticket.
func (a *api) openTicket(w http.ResponseWriter, r *http.Request) {
	id, ok := a.intIDOnly(w, r)
	if !ok {
		return
	}
	g, err := a.core.OpenTicket(r.Context(), id, principal(r).Name)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, a.newGroupJSON(g))
}
