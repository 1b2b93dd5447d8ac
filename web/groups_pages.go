package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/operator"
)

// groupsPage is the data of the group list.
type groupsPage struct {
	Groups []groupRow
	Form   groupForm
	Error  string
	Pager  pager
	// Updated is the group whose ticket or note was just saved.
	Updated int64
}

// groupForm is the group list's filter form, for re-display.
type groupForm struct {
	Service, MessageType, ErrorCode, Ticket string
	NoTicket, Open                          bool
	// From and To bound last_seen (datetime-local, UTC).
	From, To string
	// Filtered is true when a criterion is set.
	Filtered bool
}

func newGroupForm(v url.Values) groupForm {
	f := groupForm{
		Service:     v.Get(operator.ParamPublisherSvc),
		MessageType: v.Get(operator.ParamMessageType),
		ErrorCode:   v.Get(operator.ParamErrorCode),
		Ticket:      v.Get(operator.ParamTicket),
		NoTicket:    v.Get(operator.ParamNoTicket) == "true",
		Open:        v.Get(operator.ParamOpen) == "true",
		From:        formTime(v.Get(operator.ParamLastSeenFrom)),
		To:          formTime(v.Get(operator.ParamLastSeenTo)),
	}
	for _, p := range operator.GroupSearchParams {
		if v.Get(p) != "" {
			f.Filtered = true
		}
	}
	return f
}

// groupRow is a group of the list with the links of its page and its failures.
type groupRow struct {
	redrive.GroupSummary
	Link, FailuresLink string
	// Here is the list's address, where a saved edit returns.
	Here string
}

func (h *handler) getGroups(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := groupsPage{}
	p.Updated, _ = strconv.ParseInt(q.Get("updated"), 10, 64)
	s, err := operator.ParseGroupSearch(q)
	if err != nil {
		h.inputError(w, r, err, func(msg string) {
			p.Form, p.Error = newGroupForm(q), msg
			h.render(w, r, http.StatusBadRequest, "groups", "Groups", p)
		})
		return
	}
	base := operator.GroupSearchValues(s)
	p.Form = newGroupForm(base)
	cursor := q.Get(paramCursor)
	page, err := h.core.SearchGroups(r.Context(), operator.GroupSearchRequest{Search: s, Limit: h.cfg.PageSize, Cursor: cursor})
	if err != nil {
		h.inputError(w, r, err, func(msg string) {
			p.Error = msg
			h.render(w, r, http.StatusBadRequest, "groups", "Groups", p)
		})
		return
	}
	here := r.URL.RequestURI()
	for _, g := range page.Items {
		p.Groups = append(p.Groups, groupRow{GroupSummary: g, Link: groupLink(g.ID),
			FailuresLink: filterLink(redrive.Filter{GroupID: g.ID}), Here: here})
	}
	p.Pager = newPager("/groups", base, cursor, parseHistory(q.Get(paramPrev)), page.Next)
	h.render(w, r, http.StatusOK, "groups", "Groups", p)
}

// groupLink is the address of a group's page.
func groupLink(id int64) string { return "/groups/" + strconv.FormatInt(id, 10) }

// groupPage is the data of a group's page.
type groupPage struct {
	G *operator.GroupPageView
	// Rows are the group's failures on this page, newest first.
	Rows  []redrive.FailureSummary
	Total string
	Pager pager
	// FailuresLink lists the group's failures on the list page (to filter further or act).
	FailuresLink string
	Here         string
	Updated      bool
	// TicketLink is the ticket's address from the configured link template; CanOpenTicket
	// says a tracker is configured.
	TicketLink    string
	CanOpenTicket bool
}

func (h *handler) getGroup(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.renderError(w, r, http.StatusNotFound, "There is no group with this id.")
		return
	}
	q := r.URL.Query()
	cursor := q.Get(paramCursor)
	g, err := h.core.GroupPage(r.Context(), operator.GroupPageRequest{ID: id, Limit: h.cfg.PageSize, Cursor: cursor, Total: true})
	switch {
	case errors.Is(err, redrive.ErrNotFound):
		h.renderError(w, r, http.StatusNotFound, "There is no group with this id.")
		return
	case err != nil:
		h.inputError(w, r, err, func(msg string) { h.renderError(w, r, http.StatusBadRequest, "This page address is not valid: "+msg) })
		return
	}
	p := groupPage{G: g, Rows: g.Failures.Items, Total: totalLabel(g.Failures.Total, g.Failures.TotalMore, "failure"),
		FailuresLink: filterLink(redrive.Filter{GroupID: id}), Here: r.URL.RequestURI(), Updated: q.Get("updated") != ""}
	p.Pager = newPager(groupLink(id), nil, cursor, parseHistory(q.Get(paramPrev)), g.Failures.Next)
	p.CanOpenTicket = h.core.CanOpenTickets()
	if g.Ticket != nil {
		p.TicketLink = h.core.TicketURL(*g.Ticket)
	}
	h.render(w, r, http.StatusOK, "group", "Group #"+strconv.FormatInt(id, 10), p)
}

// dict builds a map from pairs of a key and a value, for passing several values to a shared
// template; an odd count or a key that is not a string is an error.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, errors.New("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, errors.New("dict: a key is not a string")
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// auditChange writes an audit detail's value: a change ({"from": a, "to": b}) as "a → b", with
// "none" for a null side; any other value as fmt writes it.
func auditChange(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprint(v)
	}
	from, hasFrom := m["from"]
	to, hasTo := m["to"]
	if !hasFrom || !hasTo || len(m) != 2 {
		return fmt.Sprint(v)
	}
	side := func(x any) string {
		if x == nil {
			return "none"
		}
		return fmt.Sprint(x)
	}
	return side(from) + " → " + side(to)
}

// postGroupTicket opens an issue in the tracker for a group and returns to the group page.
func (h *handler) postGroupTicket(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.renderError(w, r, http.StatusNotFound, "There is no group with this id.")
		return
	}
	_, err = h.core.OpenTicket(r.Context(), id, sessionFrom(r.Context()).principal.Name)
	switch {
	case errors.Is(err, redrive.ErrNotFound):
		h.renderError(w, r, http.StatusNotFound, "There is no group with this id.")
		return
	case errors.Is(err, redrive.ErrConflict), errors.Is(err, redrive.ErrTracker), errors.Is(err, redrive.ErrUnavailable):
		status := http.StatusConflict
		if !errors.Is(err, redrive.ErrConflict) {
			status = http.StatusBadGateway
		}
		h.renderError(w, r, status, "No ticket was opened: "+err.Error()+".")
		return
	case err != nil:
		h.serverError(w, r, "open ticket", err)
		return
	}
	http.Redirect(w, r, groupLink(id)+"?updated=1", http.StatusSeeOther)
}
