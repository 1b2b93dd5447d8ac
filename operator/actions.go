package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// Action is what an operator does to failures.
type Action string

// The actions.
const (
	// Retry republishes a failure's original record, as stored, to its original topic.
	Retry Action = "retry"
	// Close dismisses a failure with a reason.
	Close Action = "close"
	// ResendTo republishes a failure's original record to another topic (jobs only).
	ResendTo Action = "resend_to"
)

// Outcome is what became of one failure in an action.
//
// Deprecated: use redrive.Outcome, the same type.
type Outcome = redrive.Outcome

// The outcomes of an action.
//
// Deprecated: use redrive's, the same values.
const (
	OutcomeResent   = redrive.OutcomeResent
	OutcomeClosed   = redrive.OutcomeClosed
	OutcomeNotFound = redrive.OutcomeNotFound
	OutcomeConflict = redrive.OutcomeConflict
	OutcomeFailed   = redrive.OutcomeFailed
)

// actionStates are the states an action applies to: the open ones.
var actionStates = []redrive.State{redrive.StateRetryPending, redrive.StatePermanent}

// Success returns the outcome of a failure the action applied to.
func (a Action) Success() redrive.Outcome {
	if a == Close {
		return redrive.OutcomeClosed
	}
	return redrive.OutcomeResent
}

// auditAction is the audit action of one item of a: resends are "retry" entries.
func (a Action) auditAction() string {
	if a == Close {
		return redrive.AuditActionClose
	}
	return resendtype.AuditActionRetry
}

// Outcomes lists the outcomes the action can have, success first.
func (a Action) Outcomes() []redrive.Outcome {
	if a == Close {
		return []redrive.Outcome{redrive.OutcomeClosed, redrive.OutcomeNotFound, redrive.OutcomeConflict, redrive.OutcomeFailed}
	}
	return []redrive.Outcome{redrive.OutcomeResent, redrive.OutcomeNotFound, redrive.OutcomeConflict, redrive.OutcomeFailed}
}

// target is the state a failure is in after the action applied to it.
func (a Action) target() redrive.State {
	if a == Close {
		return redrive.StateClosed
	}
	return redrive.StateResent
}

// ItemOutcome is the outcome of an action for one failure.
type ItemOutcome struct {
	ID      uuid.UUID
	Outcome redrive.Outcome
	// Before is the failure's state before the action; empty when not found.
	Before redrive.State
	// After is its state after the action (for a dry run, the state it would have); empty
	// when not found.
	After redrive.State
	// Detail says why the outcome is not the action's success; empty otherwise.
	Detail string
}

// Selection names the failures an action applies to: IDs, or every open failure Filter
// selects (exactly one of the two).
type Selection struct {
	IDs    []uuid.UUID
	Filter *redrive.Filter
}

// ActionRequest asks for an action.
type ActionRequest struct {
	Action    Action
	Selection Selection
	// Principal is who asks, for the audit log. Required.
	Principal string
	// Reason says why; required to close (except in a dry run), at most MaxReasonLen
	// characters.
	Reason string
	// DryRun reports what the action would do and changes nothing.
	DryRun bool
	// Payload is the asker's payload permission: a filter's criteria follow the
	// confidentiality policy (as ListRequest.Reader).
	Payload bool
	// Release, with a close of one id, closes an ordering guard's head with release: the
	// failures parked behind it are then resent in offset order, carrying avro.HeaderRelease
	// (see ActionResult.Parked). It needs a Resender.
	Release bool
}

// ActionResult reports an action: the count of every outcome, and each item.
type ActionResult struct {
	Action Action
	DryRun bool
	// Matched is the number of distinct ids given, or of open failures the filter selects.
	Matched int
	// Counts has every outcome of the action, zero when none.
	Counts map[redrive.Outcome]int
	// Items has one outcome per failure acted on, in request order; a dry run by filter
	// only counts (Items is empty).
	Items []ItemOutcome
	// Parked has the outcomes of the failures parked behind the heads acted on
	// (store.ParkedChain) that a retry of the heads, or a close with Release, released after
	// them, head by head in offset order, other than those of the selection (which are in
	// Items). They are not counted in Matched or Counts.
	Parked []ItemOutcome
}

// Succeeded reports whether every item reached the action's success.
func (r *ActionResult) Succeeded() bool { return r.Counts[r.Action.Success()] == r.Matched }

// Act performs (or, with DryRun, previews) an action. A request that is not valid is an
// *InputError and changes nothing: an unknown action, a missing reason for a close, both or
// neither of ids and filter, more than MaxIDs ids, an empty filter, or a filter selecting
// more than MaxBulk failures. A retry without a Resender wraps redrive.ErrUnavailable. Once started,
// the action runs to its end even if ctx ends; an item that could not be acted on is reported
// as failed, never left out.
func (c *Core) Act(ctx context.Context, req ActionRequest) (*ActionResult, error) {
	reason, err := c.check(&req)
	if err != nil {
		return nil, err
	}
	res := &ActionResult{Action: req.Action, DryRun: req.DryRun, Counts: map[redrive.Outcome]int{}}
	for _, o := range req.Action.Outcomes() {
		res.Counts[o] = 0
	}
	ids := store.DistinctIDs(req.Selection.IDs)
	if f := req.Selection.Filter; f != nil {
		qctx, cancel := c.queryContext(ctx)
		defer cancel()
		switch {
		case f.PayloadField != "":
			// A decoded field search: every candidate decoded, the matches known exactly.
			if ids, err = c.decodedIDs(qctx, *f, actionStates); err != nil {
				return nil, err
			}
			if req.DryRun {
				res.Matched, res.Counts[req.Action.Success()] = len(ids), len(ids)
				return res, nil
			}
		case req.DryRun:
			n, err := c.store.CountFailures(qctx, *f, actionStates...)
			if err != nil {
				return nil, fromStore(err)
			}
			res.Matched, res.Counts[req.Action.Success()] = int(n), int(n)
			return res, nil
		default:
			if ids, _, err = c.store.FailureIDs(qctx, *f, actionStates, nil, c.cfg.MaxBulk+1); err != nil {
				return nil, fromStore(err)
			}
		}
		if len(ids) > c.cfg.MaxBulk {
			return nil, unprocessable("filter", "selects more than %d failures, the most one action may act on: narrow it (a dry run counts them)", c.cfg.MaxBulk)
		}
	}
	res.Matched = len(ids)
	if req.DryRun {
		qctx, cancel := c.queryContext(ctx)
		defer cancel()
		if res.Items, err = c.preview(qctx, req.Action, ids); err != nil {
			return nil, err
		}
	} else {
		actx, cancel := c.actionContext(ctx)
		defer cancel()
		// The entries of one bulk action share a bulk_id (and name its filter).
		var details map[string]any
		if req.Selection.Filter != nil || len(ids) > 1 {
			details = map[string]any{"bulk_id": uuid.NewString()}
		}
		if req.Selection.Filter != nil {
			details["filter"] = describeFilter(*req.Selection.Filter)
		}
		if req.Release {
			details = map[string]any{"release": true}
		}
		// Ordering chains: the failures parked behind a head acted on follow it, in order, once.
		// A failure of the selection parked behind another of it is not sent alongside its head
		// but released after it; one parked behind a CLOSED head carries the release.
		var own resendtype.ChainPlan
		deferred := map[uuid.UUID]bool{}
		act := ids
		switch {
		case req.Action == Retry && len(ids) == 1:
			if own, err = c.ownHeaders(actx, ids[0]); err != nil {
				return nil, err
			}
		case req.Action == Retry:
			if deferred, err = c.deferredFollowers(actx, ids); err != nil {
				return nil, err
			}
			if len(deferred) > 0 {
				act = slices.DeleteFunc(slices.Clone(ids), func(id uuid.UUID) bool { return deferred[id] })
			}
		}
		if res.Items, err = c.apply(actx, req.Action, act, req.Principal, reason, details, "", own.Headers()); err != nil {
			return nil, err
		}
		if req.Action == Retry || req.Release {
			followers := c.followChains(actx, req.Action, req.Release, res.Items, req.Principal, reason, details)
			res.Items, res.Parked = mergeFollowers(ids, res.Items, followers, deferred)
		}
	}
	for _, it := range res.Items {
		res.Counts[it.Outcome]++
		if !req.DryRun {
			c.actions.WithLabelValues(string(req.Action), string(it.Outcome)).Inc()
		}
	}
	return res, nil
}

// check validates req and returns the trimmed reason.
func (c *Core) check(req *ActionRequest) (string, error) {
	if req.Action != Retry && req.Action != Close {
		return "", invalid("action", "%q is not retry or close", clip.Text(string(req.Action), clip.Default))
	}
	if strings.TrimSpace(req.Principal) == "" {
		// The translators authenticate every request: this is a wiring error.
		return "", errors.New("act: a principal is required")
	}
	reason, err := CheckText("reason", req.Reason, MaxReasonLen)
	if err != nil {
		return "", err
	}
	if reason == "" && req.Action == Close && !req.DryRun {
		return "", invalid("reason", "required: say why the failures are closed")
	}
	sel := req.Selection
	switch {
	case sel.IDs != nil && sel.Filter != nil:
		return "", invalid("filter", "give ids or filter, not both")
	case sel.Filter != nil:
		if sel.Filter.IsZero() {
			return "", invalid("filter", "empty: an action by filter needs at least one criterion")
		}
		if err := sel.Filter.Validate(); err != nil {
			return "", fromStore(err)
		}
		if err := c.checkFilter(*sel.Filter, Reader{Principal: req.Principal, Payload: req.Payload}); err != nil {
			return "", err
		}
	case len(sel.IDs) == 0:
		return "", invalid("ids", "empty: give 1 to %d ids, or a filter", MaxIDs)
	case len(sel.IDs) > MaxIDs:
		return "", invalid("ids", "%d ids, at most %d per request (or use a filter)", len(sel.IDs), MaxIDs)
	}
	if req.Release && (req.Action != Close || len(sel.IDs) != 1) {
		return "", invalid("release", "only with a close of one failure (an ordering guard's head)")
	}
	if (req.Action == Retry || req.Release) && c.cfg.Resender == nil && !req.DryRun {
		return "", fmt.Errorf("%w: resending is not configured on this server", redrive.ErrUnavailable)
	}
	return reason, nil
}

// CheckText validates an operator's text (a reason, a ticket, a note): valid UTF-8, no NUL,
// at most limit characters. It returns the text trimmed.
func CheckText(field, s string, limit int) (string, error) {
	switch n := utf8.RuneCountInString(s); {
	case !utf8.ValidString(s):
		return "", invalid(field, "not valid UTF-8")
	case n > limit:
		return "", invalid(field, "%d characters, at most %d", n, limit)
	case strings.IndexByte(s, 0) >= 0:
		return "", invalid(field, "contains a NUL character")
	}
	return strings.TrimSpace(s), nil
}

// preview returns the outcomes the action would have on ids, changing nothing.
func (c *Core) preview(ctx context.Context, act Action, ids []uuid.UUID) ([]ItemOutcome, error) {
	states, err := c.store.ActionStates(ctx, ids, c.cfg.Now())
	if err != nil {
		return nil, err
	}
	out := make([]ItemOutcome, 0, len(ids))
	for _, id := range ids {
		st, ok := states[id]
		switch {
		case !ok:
			out = append(out, ItemOutcome{ID: id, Outcome: redrive.OutcomeNotFound, Detail: "no failure has this id"})
		case !slices.Contains(actionStates, st.State):
			out = append(out, ItemOutcome{ID: id, Outcome: redrive.OutcomeConflict, Before: st.State, After: st.State,
				Detail: (&redrive.TransitionError{ID: id, From: st.State, Action: string(act)}).Error()})
		case st.Leased:
			out = append(out, ItemOutcome{ID: id, Outcome: redrive.OutcomeConflict, Before: st.State, After: st.State,
				Detail: "a resend of this failure is in progress"})
		default:
			out = append(out, ItemOutcome{ID: id, Outcome: act.Success(), Before: st.State, After: act.target()})
		}
	}
	return out, nil
}

// apply performs act on ids in chunks. A chunk that fails as a whole marks its ids, and those
// of the chunks after it, as failed: nothing is left without an outcome. When the first chunk
// fails because the resender is shutting down, nothing was done: that is an error wrapping
// redrive.ErrUnavailable.
func (c *Core) apply(ctx context.Context, act Action, ids []uuid.UUID, principal, reason string, details map[string]any, target string, headers []avro.Header) ([]ItemOutcome, error) {
	chunk := redrive.MaxCloseIDs
	if act != Close {
		chunk = max(1, c.cfg.Resender.MaxIDs())
	}
	out := make([]ItemOutcome, 0, len(ids))
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(start+chunk, len(ids))]
		var (
			res []ItemOutcome
			err error
		)
		if act != Close {
			res, err = c.retry(ctx, part, principal, reason, details, target, headers)
		} else {
			res, err = c.close(ctx, part, principal, reason, details)
		}
		if errors.Is(err, redrive.ErrClosed) && start == 0 {
			return nil, fmt.Errorf("%w: the resender is shutting down", redrive.ErrUnavailable)
		}
		if err != nil {
			c.log.Error("operator: action failed", "action", act, "principal", principal, "done", start, "left", len(ids)-start, "error", err)
			detail := string(act) + " failed: internal error; the server log has the details"
			if errors.Is(err, redrive.ErrClosed) {
				detail = string(act) + " failed: the resender is shutting down"
			}
			for _, id := range ids[start:] {
				out = append(out, ItemOutcome{ID: id, Outcome: redrive.OutcomeFailed, Detail: detail})
			}
			return out, nil
		}
		out = append(out, res...)
	}
	return out, nil
}

// retry resends ids (at most the resender's MaxIDs), each record with headers added.
func (c *Core) retry(ctx context.Context, ids []uuid.UUID, principal, reason string, details map[string]any, target string, headers []avro.Header) ([]ItemOutcome, error) {
	res, err := c.cfg.Resender.ResendIDs(ctx, ids, resendtype.ManualRequest{Principal: principal, Reason: reason, Details: details,
		TargetTopic: target, Headers: headers})
	if err != nil {
		return nil, err
	}
	out := make([]ItemOutcome, len(res.Items))
	for i, it := range res.Items {
		out[i] = resendOutcome(it)
	}
	return out, nil
}

// resendOutcome is the outcome of one manual resend.
func resendOutcome(it resendtype.ItemResult) ItemOutcome {
	o := ItemOutcome{ID: it.ID, Outcome: it.Outcome, Before: it.State, After: it.State, Detail: it.Error}
	switch it.Outcome {
	case redrive.OutcomeResent:
		o.After = redrive.StateResent
	case redrive.OutcomeNotFound, redrive.OutcomeConflict:
	default:
		o.Outcome = redrive.OutcomeFailed
	}
	return o
}

// close closes ids (at most redrive.MaxCloseIDs).
func (c *Core) close(ctx context.Context, ids []uuid.UUID, principal, reason string, details map[string]any) ([]ItemOutcome, error) {
	res, err := c.store.CloseFailures(ctx, store.CloseRequest{IDs: ids, Principal: principal, Reason: reason, Details: details})
	if err != nil {
		return nil, err
	}
	out := make([]ItemOutcome, len(res))
	for i, r := range res {
		o := ItemOutcome{ID: r.ID, Outcome: r.Outcome, Before: r.State, After: r.State, Detail: r.Detail}
		if r.Outcome == redrive.OutcomeClosed {
			o.After = redrive.StateClosed
		}
		out[i] = o
	}
	return out, nil
}

// describeFilter returns f for an audit entry: each parameter with its value, or its values
// when it has several.
func describeFilter(f redrive.Filter) map[string]any {
	out := map[string]any{}
	for name, vs := range FilterValues(f) {
		if len(vs) == 1 {
			out[name] = vs[0]
		} else {
			out[name] = vs
		}
	}
	return out
}
