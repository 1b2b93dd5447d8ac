package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/store"
)

// Limits of operator input, in characters: those of the API and the store.
const (
	maxReasonLen = api.MaxReasonLen
	maxTicketLen = store.MaxTicketLen
	maxNoteLen   = store.MaxNoteLen
)

// actionTimeout bounds a confirmed retry or close (a thousand resends at the resender's rate
// limit take seconds).
const actionTimeout = 10 * time.Minute

// action is retry or close.
type action string

const (
	actionRetry action = "retry"
	actionClose action = "close"
)

// actionForm is a posted action: what to do, to which failures, and why.
type actionForm struct {
	Action action
	// All is true for "all matching the filter"; IDs holds the selection otherwise.
	All    bool
	IDs    []uuid.UUID
	Filter Filter
	Reason string
	// Back is where the result page links back to.
	Back string
}

// parseActionForm reads an action form. problem, when not empty, tells the operator what is
// wrong with it.
func (h *handler) parseActionForm(r *http.Request, act action) (a actionForm, problem string) {
	a = actionForm{Action: act, Back: localPath(r.PostFormValue("back"))}
	if a.Action == "" {
		a.Action = action(r.PostFormValue("action"))
	}
	if a.Action != actionRetry && a.Action != actionClose {
		return a, "Choose retry or close."
	}
	a.All = r.PostFormValue("scope") == "all"
	a.Reason = strings.TrimSpace(r.PostFormValue("reason"))
	if n := utf8.RuneCountInString(a.Reason); n > maxReasonLen || !utf8.ValidString(a.Reason) {
		return a, fmt.Sprintf("The reason is too long (%d characters, at most %d).", n, maxReasonLen)
	}
	if a.All {
		f, err := ParseFilter(r.PostForm)
		if err != nil {
			return a, fmt.Sprintf("The filter is not valid: %s.", strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
		}
		a.Filter = f
		return a, ""
	}
	seen := map[uuid.UUID]bool{}
	for _, s := range r.PostForm["id"] {
		id, err := uuid.Parse(s)
		if err != nil {
			return a, "The selection holds an id that is not valid."
		}
		if !seen[id] {
			seen[id] = true
			a.IDs = append(a.IDs, id)
		}
	}
	switch {
	case len(a.IDs) == 0:
		return a, "Select at least one failure, or choose all failures matching the filter."
	case len(a.IDs) > h.cfg.MaxBulk:
		return a, fmt.Sprintf("%d failures are selected; at most %d can be handled at once.", len(a.IDs), h.cfg.MaxBulk)
	}
	return a, ""
}

func (a actionForm) target(limit int) Target {
	if a.All {
		return Target{Filter: a.Filter, Limit: limit}
	}
	return Target{IDs: a.IDs}
}

// confirmPage is the data of the confirmation page.
type confirmPage struct {
	A actionForm
	// Count is how many failures the action would affect now; Applies how many it will apply
	// to (Count, capped at MaxBulk for a filter).
	Count, Applies int64
	Selected       int64
	Hidden         []hiddenField
	FilterLink     string
	Error          string
}

func (h *handler) postConfirm(w http.ResponseWriter, r *http.Request) {
	a, problem := h.parseActionForm(r, "")
	if problem != "" {
		h.renderError(w, r, http.StatusBadRequest, problem)
		return
	}
	h.confirm(w, r, a, "")
}

// confirm renders the confirmation page of a: the dry-run count and the reason field.
func (h *handler) confirm(w http.ResponseWriter, r *http.Request, a actionForm, problem string) {
	n, err := h.cfg.Backend.CountMatching(r.Context(), a.target(h.cfg.MaxBulk))
	if err != nil {
		h.actionError(w, r, "dry run", err)
		return
	}
	p := confirmPage{A: a, Count: n, Applies: n, Selected: int64(len(a.IDs)), Error: problem}
	if a.All {
		p.Applies = min(n, int64(h.cfg.MaxBulk))
		p.Hidden = hiddenFields(a.Filter.Values())
		p.FilterLink = filterLink(a.Filter)
	}
	status := http.StatusOK
	if problem != "" {
		status = http.StatusBadRequest
	}
	title := "Retry failures"
	if a.Action == actionClose {
		title = "Close failures"
	}
	h.render(w, r, status, "confirm", title, p)
}

// resultPage is the data of an action's result.
type resultPage struct {
	A      actionForm
	R      ActionResult
	Single string
}

func (h *handler) postRetry(w http.ResponseWriter, r *http.Request) { h.act(w, r, actionRetry) }
func (h *handler) postClose(w http.ResponseWriter, r *http.Request) { h.act(w, r, actionClose) }

// act runs a confirmed action and shows its result.
func (h *handler) act(w http.ResponseWriter, r *http.Request, act action) {
	a, problem := h.parseActionForm(r, act)
	if problem != "" {
		h.renderError(w, r, http.StatusBadRequest, problem)
		return
	}
	if a.Action == actionClose && a.Reason == "" {
		h.confirm(w, r, a, "A reason is required to close failures.")
		return
	}
	s := sessionFrom(r.Context())
	req := ActionRequest{Principal: s.principal.Name, Reason: a.Reason}
	do := h.cfg.Backend.Retry
	if act == actionClose {
		do = h.cfg.Backend.Close
	}
	// A confirmed action runs to its end even when the browser goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), actionTimeout)
	defer cancel()
	res, err := do(ctx, a.target(h.cfg.MaxBulk), req)
	if err != nil {
		h.actionError(w, r, string(act), err)
		return
	}
	h.cfg.Logger.Info("web: "+string(act), "principal", req.Principal, "all", a.All, "ids", len(a.IDs),
		"done", res.Done, "skipped", res.Skipped, "not_found", res.NotFound, "failed", res.Failed)
	p := resultPage{A: a, R: res}
	if len(a.IDs) == 1 {
		p.Single = "/failures/" + a.IDs[0].String()
	}
	title := "Retried"
	if act == actionClose {
		title = "Closed"
	}
	h.render(w, r, http.StatusOK, "result", title, p)
}

// actionError shows an invalid request's message, or a generic one for anything else.
func (h *handler) actionError(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, ErrInvalid) {
		h.renderError(w, r, http.StatusBadRequest, "The request is not valid: "+strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
		return
	}
	h.serverError(w, r, what, err)
}

func (h *handler) postGroup(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.renderError(w, r, http.StatusNotFound, "There is no group with this id.")
		return
	}
	u := GroupUpdate{Ticket: strings.TrimSpace(r.PostFormValue("ticket")), Note: strings.TrimSpace(r.PostFormValue("note"))}
	switch {
	case !utf8.ValidString(u.Ticket) || !utf8.ValidString(u.Note) || strings.IndexByte(u.Ticket+u.Note, 0) >= 0:
		h.renderError(w, r, http.StatusBadRequest, "The ticket and note must be text.")
		return
	case utf8.RuneCountInString(u.Ticket) > maxTicketLen:
		h.renderError(w, r, http.StatusBadRequest, fmt.Sprintf("The ticket is too long (at most %d characters).", maxTicketLen))
		return
	case utf8.RuneCountInString(u.Note) > maxNoteLen:
		h.renderError(w, r, http.StatusBadRequest, fmt.Sprintf("The note is too long (at most %d characters).", maxNoteLen))
		return
	}
	_, err = h.cfg.Backend.UpdateGroup(r.Context(), id, u, sessionFrom(r.Context()).principal)
	switch {
	case errors.Is(err, ErrNotFound):
		h.renderError(w, r, http.StatusNotFound, "There is no group with this id.")
		return
	case err != nil:
		h.actionError(w, r, "update group", err)
		return
	}
	back, err := url.Parse(localPath(r.PostFormValue("back")))
	if err != nil || back.Path != "/groups" {
		back = &url.URL{Path: "/groups"}
	}
	q := back.Query()
	q.Set("updated", strconv.FormatInt(id, 10))
	back.RawQuery, back.Fragment = q.Encode(), "group-"+strconv.FormatInt(id, 10)
	http.Redirect(w, r, back.String(), http.StatusSeeOther)
}
