package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/operator"
)

// reactivationJSON is a reactivation run of the own dead-letter topic.
type reactivationJSON struct {
	ID           int64                     `json:"id"`
	Topic        string                    `json:"topic"`
	Cluster      string                    `json:"cluster"`
	Principal    string                    `json:"principal"`
	Reason       *string                   `json:"reason"`
	Limit        *int64                    `json:"limit"`
	UpToNow      bool                      `json:"up_to_now"`
	State        redrive.ReactivationState `json:"state"`
	Read         int64                     `json:"read"`
	Reingested   int64                     `json:"reingested"`
	Duplicates   int64                     `json:"duplicates"`
	StillFailing int64                     `json:"still_failing"`
	Error        *string                   `json:"error"`
	StartedAt    time.Time                 `json:"started_at"`
	UpdatedAt    time.Time                 `json:"updated_at"`
	FinishedAt   *time.Time                `json:"finished_at"`
	Audit        []auditJSON               `json:"audit,omitempty"`
}

func newReactivationJSON(r *redrive.Reactivation) reactivationJSON {
	return reactivationJSON{ID: r.ID, Topic: r.Topic, Cluster: r.Cluster, Principal: r.Principal, Reason: r.Reason, Limit: r.Limit,
		UpToNow: r.UpToNow, State: r.State, Read: r.Read, Reingested: r.Reingested, Duplicates: r.Duplicates,
		StillFailing: r.StillFailing, Error: r.Error, StartedAt: r.StartedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt}
}

// reactivateBody is the body of POST /dead-letters/reactivations.
type reactivateBody struct {
	Limit   int64   `json:"limit"`
	UpToNow bool    `json:"up_to_now"`
	Reason  *string `json:"reason"`
	Cluster string  `json:"cluster"`
}

// reactivate serves POST /dead-letters/reactivations (admin).
func (a *api) reactivate(w http.ResponseWriter, r *http.Request) {
	var body reactivateBody
	_, err := parseQuery(r)
	if err == nil {
		err = a.decodeBody(w, r, &body, false)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	run, err := a.core.Reactivate(r.Context(), operator.ReactivateRequest{Principal: principal(r).Name, Reason: deref(body.Reason),
		Limit: body.Limit, UpToNow: body.UpToNow, Cluster: body.Cluster})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", Prefix+"/dead-letters/reactivations/"+strconv.FormatInt(run.ID, 10))
	writeJSON(w, http.StatusAccepted, newReactivationJSON(run))
}

// listReactivations serves GET /dead-letters/reactivations.
func (a *api) listReactivations(w http.ResponseWriter, r *http.Request) {
	limit, cursor, err := pageParams(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	runs, err := a.core.Reactivations(r.Context(), limit, cursor)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pageOf(runs.Items, newReactivationJSON, runs.Next))
}

// getReactivation serves GET /dead-letters/reactivations/{id}.
func (a *api) getReactivation(w http.ResponseWriter, r *http.Request) {
	id, ok := a.intIDOnly(w, r)
	if !ok {
		return
	}
	v, err := a.core.Reactivation(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := newReactivationJSON(v.Reactivation)
	out.Audit = auditListJSON(v.Audit)
	writeJSON(w, http.StatusOK, out)
}
