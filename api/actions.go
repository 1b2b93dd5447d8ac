package api

import (
	"net/http"
	"strconv"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/operator"
)

// reasonBody is the body of a single retry or close.
type reasonBody struct {
	Reason *string `json:"reason"`
	// Release, on a close, closes an ordering guard's head with release.
	Release bool `json:"release"`
}

// actOneJSON is the outcome of a single retry or close, with the failures parked behind the
// head that were resent after it.
type actOneJSON struct {
	itemJSON
	Parked []itemJSON `json:"parked,omitempty"`
}

// itemJSON is the outcome of an action for one failure.
type itemJSON struct {
	ID      uuid.UUID       `json:"id"`
	Outcome redrive.Outcome `json:"outcome"`
	// StateBefore is the failure's state before the action; null when it does not exist.
	StateBefore *redrive.State `json:"state_before"`
	// StateAfter is its state after the action (what it would be, for a dry run); null when
	// it does not exist.
	StateAfter *redrive.State `json:"state_after"`
	Detail     string         `json:"detail,omitempty"`
}

func newItemJSON(o operator.ItemOutcome) itemJSON {
	it := itemJSON{ID: o.ID, Outcome: o.Outcome, Detail: o.Detail}
	if o.Before != "" {
		it.StateBefore = &o.Before
	}
	if o.After != "" {
		it.StateAfter = &o.After
	}
	return it
}

// retryOne serves POST /failures/{id}/retry.
func (a *api) retryOne(w http.ResponseWriter, r *http.Request) { a.actOne(w, r, operator.Retry) }

// closeOne serves POST /failures/{id}/close.
func (a *api) closeOne(w http.ResponseWriter, r *http.Request) { a.actOne(w, r, operator.Close) }

func (a *api) actOne(w http.ResponseWriter, r *http.Request, act operator.Action) {
	id, err := pathID(r)
	if err == nil {
		_, err = parseQuery(r)
	}
	var body reasonBody
	if err == nil {
		err = a.decodeBody(w, r, &body, act != operator.Close)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.core.Act(r.Context(), operator.ActionRequest{Action: act, Selection: operator.Selection{IDs: []uuid.UUID{id}},
		Principal: principal(r).Name, Reason: deref(body.Reason), Payload: reader(r).Payload, Release: body.Release})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	o := res.Items[0]
	switch o.Outcome {
	case act.Success():
		writeJSON(w, http.StatusOK, actOneJSON{itemJSON: newItemJSON(o), Parked: listOf(res.Parked, func(p *operator.ItemOutcome) itemJSON { return newItemJSON(*p) })})
	case redrive.OutcomeNotFound:
		writeProblem(w, r, http.StatusNotFound, "id", "no failure has this id")
	case redrive.OutcomeConflict:
		writeProblem(w, r, http.StatusConflict, "", o.Detail)
	default:
		writeProblem(w, r, http.StatusBadGateway, "", string(act)+" failed: "+o.Detail)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// bulkBody is the body of POST /failures/retry and POST /failures/close: either ids or a
// filter.
type bulkBody struct {
	IDs    []string              `json:"ids"`
	Filter *operator.FilterInput `json:"filter"`
	Reason *string               `json:"reason"`
	DryRun bool                  `json:"dry_run"`
}

// bulkResponse reports a bulk action: the count of every outcome and each failure that did
// not reach the action's target state. A dry run reports what would happen.
type bulkResponse struct {
	Action operator.Action `json:"action"`
	DryRun bool            `json:"dry_run"`
	// Matched is the number of distinct ids given, or of failures the filter selects in a
	// state the action applies to.
	Matched int `json:"matched"`
	// Counts has every outcome of the action, zero when none.
	Counts map[redrive.Outcome]int `json:"counts"`
	// Errors lists every item whose outcome is not the action's success.
	Errors []itemJSON `json:"errors"`
	// ParkedCounts counts the outcomes of the failures parked behind the heads acted on that
	// were released after them (not of the selection); left out when there are none.
	ParkedCounts map[operator.Outcome]int `json:"parked_counts,omitempty"`
	// ParkedErrors lists those of them that were not resent.
	ParkedErrors []itemJSON `json:"parked_errors,omitempty"`
}

// retryBulk serves POST /failures/retry.
func (a *api) retryBulk(w http.ResponseWriter, r *http.Request) { a.actBulk(w, r, operator.Retry) }

// closeBulk serves POST /failures/close.
func (a *api) closeBulk(w http.ResponseWriter, r *http.Request) { a.actBulk(w, r, operator.Close) }

func (a *api) actBulk(w http.ResponseWriter, r *http.Request, act operator.Action) {
	var body bulkBody
	_, err := parseQuery(r)
	if err == nil {
		err = a.decodeBody(w, r, &body, false)
	}
	req := operator.ActionRequest{Action: act, Principal: principal(r).Name, Reason: deref(body.Reason), DryRun: body.DryRun,
		Payload: reader(r).Payload}
	if err == nil && body.IDs != nil && len(body.IDs) == 0 {
		err = badRequest("ids", "empty: give 1 to %d ids", operator.MaxIDs)
	}
	if err == nil {
		req.Selection, err = selectionOf(body.IDs, body.Filter, operator.MaxIDs, "request")
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.core.Act(r.Context(), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	resp := bulkResponse{Action: act, DryRun: res.DryRun, Matched: res.Matched, Counts: res.Counts, Errors: []itemJSON{}}
	for _, o := range res.Items {
		if o.Outcome != act.Success() {
			resp.Errors = append(resp.Errors, newItemJSON(o))
		}
	}
	for _, o := range res.Parked {
		if resp.ParkedCounts == nil {
			resp.ParkedCounts = map[operator.Outcome]int{}
		}
		resp.ParkedCounts[o.Outcome]++
		if o.Outcome != operator.OutcomeResent {
			resp.ParkedErrors = append(resp.ParkedErrors, newItemJSON(o))
		}
	}
	status := http.StatusOK
	if (len(resp.Errors) > 0 || len(resp.ParkedErrors) > 0) && !res.DryRun {
		status = http.StatusMultiStatus
	}
	writeJSON(w, status, resp)
}

// selectionOf parses the ids (at most max, per request or job) or the filter of a body, naming
// the first bad id or criterion.
func selectionOf(ids []string, filter *operator.FilterInput, max int, per string) (operator.Selection, error) {
	var sel operator.Selection
	if ids != nil {
		if len(ids) > max {
			return sel, badRequest("ids", "%d ids, at most %d per %s (or use a filter)", len(ids), max, per)
		}
		sel.IDs = make([]uuid.UUID, len(ids))
		for i, s := range ids {
			id, err := uuid.Parse(s)
			if err != nil || len(s) != 36 {
				return sel, badRequest("ids["+strconv.Itoa(i)+"]", "%q is not a UUID", clip.Text(s, clip.Default))
			}
			sel.IDs[i] = id
		}
	}
	if filter != nil {
		f, err := filter.Filter()
		if err != nil {
			return sel, err
		}
		sel.Filter = &f
	}
	return sel, nil
}
