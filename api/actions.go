package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/redrive/redrive/store"
)

// Outcome is what became of one failure in a retry or close request.
type Outcome string

// The outcomes of an action.
const (
	// OutcomeResent: the original was republished and the failure is RESENT.
	OutcomeResent Outcome = "resent"
	// OutcomeClosed: the failure is CLOSED.
	OutcomeClosed Outcome = "closed"
	// OutcomeNotFound: no failure has the id.
	OutcomeNotFound Outcome = "not_found"
	// OutcomeConflict: the failure's state does not allow the action (or a resend of it is
	// in progress); it is unchanged.
	OutcomeConflict Outcome = "conflict"
	// OutcomeFailed: the action was attempted and did not succeed (e.g. the broker did not
	// acknowledge the resend); the failure keeps its state.
	OutcomeFailed Outcome = "failed"
)

// ItemOutcome is the outcome of an action for one failure.
type ItemOutcome struct {
	ID      uuid.UUID
	Outcome Outcome
	// State is the failure's state before the request; empty when unknown.
	State store.State
	// Detail says why the outcome is not a success; empty otherwise.
	Detail string
}

// Resender republishes stored failures on an operator's request. Resend returns one outcome
// per distinct id (resent, not_found, conflict or failed) and writes the audit log entries
// itself. An error means the request as a whole could not be served (ErrResendUnavailable
// when the resender is shutting down).
type Resender interface {
	Resend(ctx context.Context, ids []uuid.UUID, principal, reason string) ([]ItemOutcome, error)
}

// ErrResendUnavailable means the resender cannot take requests (e.g. it is shutting down).
var ErrResendUnavailable = errors.New("resend unavailable")

// action is retry or close.
type action struct {
	name     string // "retry" or "close"
	success  Outcome
	outcomes []Outcome     // the outcomes it reports, success first
	states   []store.State // the states it applies to
	// reasonRequired says whether a reason must be given.
	reasonRequired bool
}

var (
	retryAction = action{name: "retry", success: OutcomeResent,
		outcomes: []Outcome{OutcomeResent, OutcomeNotFound, OutcomeConflict, OutcomeFailed},
		states:   []store.State{store.StateRetryPending, store.StatePermanent}}
	closeAction = action{name: "close", success: OutcomeClosed,
		outcomes: []Outcome{OutcomeClosed, OutcomeNotFound, OutcomeConflict},
		states:   []store.State{store.StateRetryPending, store.StatePermanent}, reasonRequired: true}
)

// reasonBody is the body of a single retry or close.
type reasonBody struct {
	Reason *string `json:"reason"`
}

// checkReason validates a reason: required for close, at most MaxReasonLen characters.
func checkReason(act action, reason *string) (string, error) {
	if reason == nil || strings.TrimSpace(*reason) == "" {
		if act.reasonRequired {
			return "", badRequest("reason", "required: say why the failures are closed")
		}
		return "", nil
	}
	switch n := utf8.RuneCountInString(*reason); {
	case !utf8.ValidString(*reason):
		return "", badRequest("reason", "not valid UTF-8")
	case n > MaxReasonLen:
		return "", badRequest("reason", "%d characters, at most %d", n, MaxReasonLen)
	case strings.IndexByte(*reason, 0) >= 0:
		return "", badRequest("reason", "contains a NUL character")
	}
	return strings.TrimSpace(*reason), nil
}

// itemJSON is the outcome for one failure.
type itemJSON struct {
	ID      uuid.UUID `json:"id"`
	Outcome Outcome   `json:"outcome"`
	State   *string   `json:"state"`
	Detail  string    `json:"detail,omitempty"`
}

func newItemJSON(o ItemOutcome) itemJSON {
	it := itemJSON{ID: o.ID, Outcome: o.Outcome, Detail: o.Detail}
	if o.State != "" {
		s := string(o.State)
		it.State = &s
	}
	return it
}

// retryOne serves POST /failures/{id}/retry.
func (a *api) retryOne(w http.ResponseWriter, r *http.Request) {
	a.actOne(w, r, retryAction)
}

// closeOne serves POST /failures/{id}/close.
func (a *api) closeOne(w http.ResponseWriter, r *http.Request) {
	a.actOne(w, r, closeAction)
}

func (a *api) actOne(w http.ResponseWriter, r *http.Request, act action) {
	id, err := pathID(r)
	if err == nil {
		_, err = parseQuery(r, nil)
	}
	var body reasonBody
	if err == nil {
		err = a.decodeBody(w, r, &body, !act.reasonRequired)
	}
	var reason string
	if err == nil {
		reason, err = checkReason(act, body.Reason)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if act.name == "retry" && a.cfg.Resender == nil {
		writeProblem(w, r, http.StatusServiceUnavailable, "", "resending is not configured on this server")
		return
	}
	ctx, cancel := a.actionContext(r)
	defer cancel()
	out, err := a.apply(ctx, act, []uuid.UUID{id}, principal(r).Name, reason, nil)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	o := out[0]
	switch o.Outcome {
	case act.success:
		writeJSON(w, http.StatusOK, newItemJSON(o))
	case OutcomeNotFound:
		writeProblem(w, r, http.StatusNotFound, "id", "no failure has this id")
	case OutcomeConflict:
		writeProblem(w, r, http.StatusConflict, "", o.Detail)
	default:
		writeProblem(w, r, http.StatusBadGateway, "", "resend failed: "+o.Detail)
	}
}

// apply performs act on ids (at most MaxIDs) and returns one outcome per distinct id.
func (a *api) apply(ctx context.Context, act action, ids []uuid.UUID, principal, reason string, details map[string]any) ([]ItemOutcome, error) {
	var out []ItemOutcome
	switch act.name {
	case "retry":
		res, err := a.cfg.Resender.Resend(ctx, ids, principal, reason)
		if err != nil {
			return nil, err
		}
		out = res
	default:
		res, err := a.store.CloseFailures(ctx, store.CloseRequest{IDs: ids, Principal: principal, Reason: reason, Details: details})
		if err != nil {
			return nil, err
		}
		out = make([]ItemOutcome, len(res))
		for i, c := range res {
			out[i] = ItemOutcome{ID: c.ID, State: c.State, Detail: c.Detail, Outcome: Outcome(c.Outcome)}
		}
	}
	for _, o := range out {
		a.metrics.actions.WithLabelValues(act.name, string(o.Outcome)).Inc()
	}
	return out, nil
}

// preview returns the outcomes act would have on ids, changing nothing.
func (a *api) preview(ctx context.Context, act action, ids []uuid.UUID) ([]ItemOutcome, error) {
	states, err := a.store.ActionStates(ctx, ids, a.cfg.Now())
	if err != nil {
		return nil, err
	}
	var out []ItemOutcome
	seen := map[uuid.UUID]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		st, ok := states[id]
		switch {
		case !ok:
			out = append(out, ItemOutcome{ID: id, Outcome: OutcomeNotFound, Detail: "no failure has this id"})
		case !act.allows(st.State):
			out = append(out, ItemOutcome{ID: id, Outcome: OutcomeConflict, State: st.State,
				Detail: (&store.TransitionError{ID: id, From: st.State, Action: act.name}).Error()})
		case st.Leased:
			out = append(out, ItemOutcome{ID: id, Outcome: OutcomeConflict, State: st.State, Detail: "a resend of this failure is in progress"})
		default:
			out = append(out, ItemOutcome{ID: id, Outcome: act.success, State: st.State})
		}
	}
	return out, nil
}

func (act action) allows(s store.State) bool {
	for _, ok := range act.states {
		if s == ok {
			return true
		}
	}
	return false
}
