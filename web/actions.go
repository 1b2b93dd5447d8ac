package web

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/operator"
)

// actionForm is a posted action: what to do, to which failures, and why. It is read, not
// judged: the operator core decides whether the request is valid (an empty filter, too many
// failures, a close without a reason) and says why not.
type actionForm struct {
	Action operator.Action
	// All is true for "all matching the filter"; IDs holds the selection otherwise.
	All    bool
	IDs    []uuid.UUID
	Filter redrive.Filter
	Reason string
	// Release closes an ordering guard's head with release (operator.ActionRequest.Release).
	Release bool
	// Back is where the result page links back to.
	Back string
}

// readActionForm reads an action form (act is the action of the address, "" for the
// confirmation, which names it in a field). The error, an *operator.InputError, says what
// cannot be read; whether the action is valid is the core's to say.
func readActionForm(r *http.Request, act operator.Action) (actionForm, error) {
	a := actionForm{Action: act, Back: localPath(r.PostFormValue("back")), Reason: r.PostFormValue("reason"),
		Release: r.PostFormValue("release") == "true"}
	if a.Action == "" {
		a.Action = operator.Action(r.PostFormValue("action"))
	}
	if a.All = r.PostFormValue("scope") == "all"; a.All {
		f, err := operator.ParseFilter(r.PostForm)
		a.Filter = f
		return a, err
	}
	for _, s := range r.PostForm["id"] {
		id, err := uuid.Parse(s)
		if err != nil {
			return a, &operator.InputError{Field: "id", Detail: "the selection holds an id that is not valid: " + clip.Text(s, clip.Default)}
		}
		a.IDs = append(a.IDs, id)
	}
	return a, nil
}

// request returns the core's request for a, asked by rd.
func (a actionForm) request(rd operator.Reader, dryRun bool) operator.ActionRequest {
	return operator.ActionRequest{Action: a.Action, Principal: rd.Principal, Reason: a.Reason, DryRun: dryRun, Selection: a.selection(),
		Payload: rd.Payload, Release: a.Release}
}

// selection returns the core's selection of a: the filter for "all matching", else the ids.
func (a actionForm) selection() operator.Selection {
	if a.All {
		f := a.Filter
		return operator.Selection{Filter: &f}
	}
	return operator.Selection{IDs: a.IDs}
}

// confirmPage is the data of the confirmation page: the dry run of the action.
type confirmPage struct {
	A actionForm
	R *operator.ActionResult
	// Count is how many failures the action would change now; Others the selected ones it
	// would not (each with why in R.Items).
	Count, Others int
	// OverCap is true when the filter selects more failures than one action may act on
	// (MaxBulk); the action is then refused and not offered.
	OverCap    bool
	MaxBulk    int
	Hidden     []hiddenField
	FilterLink string
	Error      string
	// Parked are the open failures parked behind the one head selected (or after the one
	// parked failure selected), which the action resends after it, in offset order.
	Parked []redrive.ParkedLink
	// ClosedHead is the CLOSED head of the one parked failure selected for a retry: the
	// resends carry the release.
	ClosedHead *redrive.ParkedLink
}

func (h *handler) postConfirm(w http.ResponseWriter, r *http.Request) {
	a, err := readActionForm(r, "")
	if err != nil {
		h.refused(w, r, err)
		return
	}
	h.confirm(w, r, a, "", http.StatusOK)
}

// confirm renders the confirmation page of a from the core's dry run, with problem (the
// reason an attempt to act was refused) when not empty.
func (h *handler) confirm(w http.ResponseWriter, r *http.Request, a actionForm, problem string, status int) {
	res, err := h.core.Act(r.Context(), a.request(reader(r), true))
	if err != nil {
		h.refused(w, r, err)
		return
	}
	p := confirmPage{A: a, R: res, Count: res.Counts[a.Action.Success()], MaxBulk: h.core.MaxBulk(), Error: problem}
	p.Others = res.Matched - p.Count
	if len(a.IDs) == 1 && (a.Action == operator.Retry || a.Release) {
		ch, err := h.core.ParkedChain(r.Context(), a.IDs[0])
		switch {
		case err != nil || ch.Head == nil:
		case ch.Head.ID == a.IDs[0]:
			p.Parked = ch.Open()
		case a.Action == operator.Retry && ch.Head.State == redrive.StateClosed:
			p.ClosedHead = ch.Head
			open := ch.Open()
			if i := slices.IndexFunc(open, func(l redrive.ParkedLink) bool { return l.ID == a.IDs[0] }); i >= 0 {
				p.Parked = open[i+1:]
			}
		}
	}
	if a.All {
		p.OverCap = res.Matched > h.core.MaxBulk()
		p.Hidden = hiddenFields(a.Filter)
		p.FilterLink = filterLink(a.Filter)
	}
	title := "Retry failures"
	if a.Action == operator.Close {
		title = "Close failures"
	}
	h.render(w, r, status, "confirm", title, p)
}

// resultPage is the data of an action's result.
type resultPage struct {
	A actionForm
	// Matched is how many failures the action was asked to act on.
	Matched int
	// Counts lists every outcome of the action with its count, success first.
	Counts []outcomeCount
	// Others are the items that did not reach the action's success (the first ones);
	// MoreOthers counts those not listed.
	Others     []operator.ItemOutcome
	MoreOthers int
	// By and At say who acted, and when.
	By string
	At time.Time
	// Single is the failure acted on alone; Back the page the action started from, when
	// it is neither that failure nor the list ("" otherwise).
	Single, Back string
	// Parked is how many failures parked behind the head were resent after it.
	Parked int
}

type outcomeCount struct {
	Outcome redrive.Outcome
	Count   int
	Success bool
}

func (h *handler) postRetry(w http.ResponseWriter, r *http.Request) { h.act(w, r, operator.Retry) }
func (h *handler) postClose(w http.ResponseWriter, r *http.Request) { h.act(w, r, operator.Close) }

// act runs a confirmed action and shows its result. A request the core refuses goes back to
// the confirmation with the core's reason.
func (h *handler) act(w http.ResponseWriter, r *http.Request, act operator.Action) {
	a, err := readActionForm(r, act)
	if err != nil {
		h.refused(w, r, err)
		return
	}
	principal := sessionFrom(r.Context()).principal.Name
	// The core runs a started action to its end even when the browser goes away.
	res, err := h.core.Act(r.Context(), a.request(reader(r), false))
	var ie *operator.InputError
	if errors.As(err, &ie) {
		h.confirm(w, r, a, ie.Error(), ie.Status())
		return
	}
	if err != nil {
		h.refused(w, r, err)
		return
	}
	h.cfg.Logger.Info("web: "+string(act), "principal", principal, "all", a.All, "matched", res.Matched, "counts", res.Counts)
	// Post/redirect/get: the result page's address carries the result, so that a reload
	// shows it again and does not act again.
	link, err := h.resultLink(newActionRecord(a, res, principal, h.cfg.Now()))
	if err != nil {
		h.serverError(w, r, "action result", err)
		return
	}
	http.Redirect(w, r, link, http.StatusSeeOther)
}

// refused answers a request the core refused: a client's mistake with its text (400, or 422
// for a well-formed request that cannot be served as asked), an action this server cannot run
// now with 503, anything else as a server error (logged; its text is not shown).
func (h *handler) refused(w http.ResponseWriter, r *http.Request, err error) {
	var ie *operator.InputError
	switch {
	case errors.As(err, &ie):
		h.renderError(w, r, ie.Status(), "The request is not valid: "+ie.Error())
	case errors.Is(err, redrive.ErrUnavailable):
		h.renderError(w, r, http.StatusServiceUnavailable, "This server cannot do this now: resending is not configured here, or the server is shutting down.")
	default:
		h.serverError(w, r, "action", err)
	}
}

func (h *handler) postGroup(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.renderError(w, r, http.StatusNotFound, "There is no group with this id.")
		return
	}
	// The form shows the ticket and note as visible text (see visible), and says so in the
	// *_shown fields: a field posted as it was shown is left as it is stored.
	var u operator.GroupUpdate
	posted := false
	for _, fld := range []struct {
		name string
		dst  **string
	}{{operator.ParamTicket, &u.Ticket}, {"note", &u.Note}} {
		v, ok := r.PostForm[fld.name]
		if !ok {
			continue
		}
		posted = true
		if shown, ok := r.PostForm[fld.name+"_shown"]; ok && len(v) == 1 && len(shown) == 1 && v[0] == shown[0] {
			continue
		}
		s := v[0]
		*fld.dst = &s
	}
	// A form that came back as it was shown changes nothing.
	if !posted || u.Ticket != nil || u.Note != nil {
		_, err := h.core.UpdateGroup(r.Context(), id, u, sessionFrom(r.Context()).principal.Name)
		switch {
		case errors.Is(err, redrive.ErrNotFound):
			h.renderError(w, r, http.StatusNotFound, "There is no group with this id.")
			return
		case err != nil:
			h.refused(w, r, err)
			return
		}
	}
	back, err := url.Parse(localPath(r.PostFormValue("back")))
	if err != nil || (back.Path != "/groups" && back.Path != groupLink(id)) {
		back = &url.URL{Path: "/groups"}
	}
	q := back.Query()
	q.Set("updated", strconv.FormatInt(id, 10))
	back.RawQuery, back.Fragment = q.Encode(), "group-"+strconv.FormatInt(id, 10)
	http.Redirect(w, r, back.String(), http.StatusSeeOther)
}
