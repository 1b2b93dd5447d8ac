package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/redrive/redrive/store"
)

// bulkBody is the body of POST /failures/retry and POST /failures/close: either ids or a
// filter.
type bulkBody struct {
	IDs    []string     `json:"ids"`
	Filter *filterInput `json:"filter"`
	Reason *string      `json:"reason"`
	DryRun bool         `json:"dry_run"`
}

// bulkResponse reports a bulk action: the count of every outcome and each failure that did
// not reach the action's target state. A dry run reports what would happen.
type bulkResponse struct {
	Action string `json:"action"`
	DryRun bool   `json:"dry_run"`
	// Matched is the number of distinct ids given, or of failures the filter selects in a
	// state the action applies to.
	Matched int `json:"matched"`
	// Counts has every outcome of the action, zero when none.
	Counts map[Outcome]int `json:"counts"`
	// Errors lists every item whose outcome is not the action's success.
	Errors []itemJSON `json:"errors"`
}

// retryBulk serves POST /failures/retry.
func (a *api) retryBulk(w http.ResponseWriter, r *http.Request) { a.actBulk(w, r, retryAction) }

// closeBulk serves POST /failures/close.
func (a *api) closeBulk(w http.ResponseWriter, r *http.Request) { a.actBulk(w, r, closeAction) }

func (a *api) actBulk(w http.ResponseWriter, r *http.Request, act action) {
	var body bulkBody
	_, err := parseQuery(r, nil)
	if err == nil {
		err = a.decodeBody(w, r, &body, false)
	}
	var (
		reason string
		ids    []uuid.UUID
		filter store.Filter
	)
	if err == nil {
		check := act
		check.reasonRequired = act.reasonRequired && !body.DryRun // a dry run changes nothing
		reason, err = checkReason(check, body.Reason)
	}
	if err == nil {
		switch {
		case body.IDs != nil && body.Filter != nil:
			err = badRequest("filter", "give ids or filter, not both")
		case body.IDs != nil:
			ids, err = parseIDs(body.IDs)
		case body.Filter != nil:
			filter, err = body.Filter.filter()
			if err == nil && filter.IsZero() {
				err = badRequest("filter", "empty: a bulk action by filter needs at least one criterion")
			}
		default:
			err = badRequest("ids", "give ids or filter")
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if act.name == "retry" && a.cfg.Resender == nil && !body.DryRun {
		writeProblem(w, r, http.StatusServiceUnavailable, "", "resending is not configured on this server")
		return
	}

	resp := bulkResponse{Action: act.name, DryRun: body.DryRun, Counts: map[Outcome]int{}, Errors: []itemJSON{}}
	for _, o := range act.outcomes {
		resp.Counts[o] = 0
	}
	details := map[string]any{"bulk_id": uuid.NewString()}
	if body.Filter != nil {
		details["filter"] = describeFilter(body.Filter)
		if body.DryRun {
			ctx, cancel := a.queryContext(r)
			defer cancel()
			n, err := a.store.CountFailures(ctx, filter, act.states...)
			if err != nil {
				a.fail(w, r, err)
				return
			}
			resp.Matched = int(n)
			resp.Counts[act.success] = int(n)
			writeJSON(w, http.StatusOK, resp)
			return
		}
		ctx, cancel := a.queryContext(r)
		defer cancel()
		ids, _, err = a.store.FailureIDs(ctx, filter, act.states, nil, a.cfg.MaxBulk+1)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if len(ids) > a.cfg.MaxBulk {
			a.fail(w, r, unprocessable("filter", "selects more than %d failures, the most one request may act on: narrow it (a dry run counts them)", a.cfg.MaxBulk))
			return
		}
	}
	resp.Matched = len(distinct(ids))

	var outcomes []ItemOutcome
	if body.DryRun {
		ctx, cancel := a.queryContext(r)
		defer cancel()
		if outcomes, err = a.preview(ctx, act, ids); err != nil {
			a.fail(w, r, err)
			return
		}
	} else {
		ctx, cancel := a.actionContext(r)
		defer cancel()
		outcomes = a.applyChunks(ctx, act, ids, principal(r).Name, reason, details)
	}
	for _, o := range outcomes {
		resp.Counts[o.Outcome]++
		if o.Outcome != act.success {
			resp.Errors = append(resp.Errors, newItemJSON(o))
		}
	}
	status := http.StatusOK
	if len(resp.Errors) > 0 && !body.DryRun {
		status = http.StatusMultiStatus
	}
	writeJSON(w, status, resp)
}

// applyChunks applies act to ids in chunks of MaxIDs. A chunk that fails as a whole marks its
// ids, and those of the chunks after it, as failed: nothing is left without an outcome.
func (a *api) applyChunks(ctx context.Context, act action, ids []uuid.UUID, principal, reason string, details map[string]any) []ItemOutcome {
	ids = distinct(ids)
	out := make([]ItemOutcome, 0, len(ids))
	for start := 0; start < len(ids); start += MaxIDs {
		chunk := ids[start:min(start+MaxIDs, len(ids))]
		res, err := a.apply(ctx, act, chunk, principal, reason, details)
		if err != nil {
			a.log.Error("api: bulk action failed", "action", act.name, "principal", principal, "done", start, "left", len(ids)-start, "error", err)
			detail := act.name + " failed: internal error; the server log has the details"
			if act.name == "retry" {
				detail = act.name + " failed: " + err.Error()
			}
			for _, id := range ids[start:] {
				out = append(out, ItemOutcome{ID: id, Outcome: OutcomeFailed, Detail: detail})
			}
			return out
		}
		out = append(out, res...)
	}
	return out
}

// parseIDs parses 1 to MaxIDs failure ids, naming the first bad one.
func parseIDs(in []string) ([]uuid.UUID, error) {
	switch {
	case len(in) == 0:
		return nil, badRequest("ids", "empty: give 1 to %d ids", MaxIDs)
	case len(in) > MaxIDs:
		return nil, badRequest("ids", "%d ids, at most %d per request (or use a filter)", len(in), MaxIDs)
	}
	out := make([]uuid.UUID, len(in))
	for i, s := range in {
		id, err := uuid.Parse(s)
		if err != nil || len(s) != 36 {
			return nil, badRequest("ids["+strconv.Itoa(i)+"]", "%q is not a UUID", truncate(s, 40))
		}
		out[i] = id
	}
	return out, nil
}

// distinct returns ids without duplicates, in first-seen order.
func distinct(ids []uuid.UUID) []uuid.UUID {
	seen := make(map[uuid.UUID]bool, len(ids))
	out := make([]uuid.UUID, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
