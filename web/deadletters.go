package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/operator"
)

// Reactivation of the service's own dead-letter topic: the runs (GET /dead-letters), one run
// with its progress and audit (GET /dead-letters/{id}, its progress as JSON for the page's
// script at GET /dead-letters/{id}/progress), and, for admins, a new run (POST /dead-letters).

// reactivateForm is the posted form of a new run, as typed.
type reactivateForm struct {
	// Scope is "limit" (up to Limit records) or "now" (up to the topic's end as it is now).
	Scope  string
	Limit  string
	Reason string
	// Cluster is the Kafka cluster whose dead-letter topic to read; "" is the first.
	Cluster string
}

// deadLettersPage is the data of the list of runs.
type deadLettersPage struct {
	Runs []redrive.Reactivation
	// Pager links the first and the next (older) page of runs.
	Pager pager
	// CanStart is true for an admin: the form of a new run shows.
	CanStart bool
	Form     reactivateForm
	Error    string
	// MaxLimit bounds the limit field.
	MaxLimit int64
	// Clusters lists the configured Kafka clusters; with more than one, the form asks which
	// cluster's dead-letter topic to read and the runs show theirs.
	Clusters []string
}

func isAdmin(r *http.Request) bool {
	s := sessionFrom(r.Context())
	return s.authed && s.principal.Role.Allows(auth.RoleAdmin)
}

func (h *handler) getDeadLetters(w http.ResponseWriter, r *http.Request) {
	h.deadLetters(w, r, http.StatusOK, reactivateForm{Scope: "limit"}, "")
}

// deadLetters renders the list of runs with the form f and problem (why a start was refused)
// when not empty.
func (h *handler) deadLetters(w http.ResponseWriter, r *http.Request, status int, f reactivateForm, problem string) {
	cursor := r.URL.Query().Get(paramCursor)
	runs, err := h.core.Reactivations(r.Context(), h.cfg.PageSize, cursor)
	if err != nil {
		h.inputError(w, r, err, func(msg string) { h.renderError(w, r, http.StatusBadRequest, "This page address is not valid: "+msg) })
		return
	}
	p := deadLettersPage{Runs: runs.Items, CanStart: isAdmin(r), Form: f, Error: problem, MaxLimit: operator.MaxReactivateLimit, Clusters: h.core.Clusters()}
	p.Pager = forwardPager("/dead-letters", cursor, runs.Next)
	h.render(w, r, status, "deadletters", "Dead letters", p)
}

// postReactivate starts a run (admins only) and shows it; a refused start goes back to the
// list with the core's reason.
func (h *handler) postReactivate(w http.ResponseWriter, r *http.Request) {
	f := reactivateForm{Scope: r.PostFormValue("scope"), Limit: strings.TrimSpace(r.PostFormValue("limit")), Reason: r.PostFormValue("reason"),
		Cluster: r.PostFormValue("cluster")}
	req := operator.ReactivateRequest{Principal: sessionFrom(r.Context()).principal.Name, Reason: f.Reason, Cluster: f.Cluster}
	var err error
	switch f.Scope {
	case "now":
		req.UpToNow = true
	case "limit":
		if f.Limit == "" {
			break // the core says what is missing
		}
		if req.Limit, err = strconv.ParseInt(f.Limit, 10, 64); err != nil {
			err = &operator.InputError{Field: "limit", Detail: fmt.Sprintf("%q is not a whole number of records", clip.Text(f.Limit, clip.Default))}
		}
	default:
		err = &operator.InputError{Field: "scope", Detail: "choose up to a number of records or up to now"}
	}
	var run *redrive.Reactivation
	if err == nil {
		run, err = h.core.Reactivate(r.Context(), req)
	}
	var ie *operator.InputError
	switch {
	case errors.As(err, &ie):
		h.deadLetters(w, r, http.StatusBadRequest, f, ie.Error())
		return
	case errors.Is(err, redrive.ErrConflict):
		h.deadLetters(w, r, http.StatusConflict, f, "A reactivation cannot start now: "+strings.TrimPrefix(err.Error(), redrive.ErrConflict.Error()+": "))
		return
	case errors.Is(err, redrive.ErrUnavailable):
		h.deadLetters(w, r, http.StatusServiceUnavailable, f, "This server does not reactivate its dead-letter topic.")
		return
	case err != nil:
		h.serverError(w, r, "reactivate", err)
		return
	}
	h.cfg.Logger.Info("web: reactivate", "principal", req.Principal, "run", run.ID, "limit", req.Limit, "up_to_now", req.UpToNow)
	http.Redirect(w, r, "/dead-letters/"+strconv.FormatInt(run.ID, 10), http.StatusSeeOther)
}

// reactivationPage is the data of one run's page.
type reactivationPage struct {
	R *operator.ReactivationView
	// Progress is the address of the run's progress as JSON, polled while it runs; P is that
	// progress now.
	Progress string
	P        progressJSON
}

// runID reads the run id of the address; false (after a 404 page) when it is not one.
func (h *handler) runID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.renderError(w, r, http.StatusNotFound, "There is no reactivation run with this id.")
		return 0, false
	}
	return id, true
}

func (h *handler) getReactivation(w http.ResponseWriter, r *http.Request) {
	id, ok := h.runID(w, r)
	if !ok {
		return
	}
	v, err := h.core.Reactivation(r.Context(), id)
	switch {
	case errors.Is(err, redrive.ErrNotFound):
		h.renderError(w, r, http.StatusNotFound, "There is no reactivation run with this id.")
		return
	case err != nil:
		h.serverError(w, r, "reactivation", err)
		return
	}
	base := "/dead-letters/" + strconv.FormatInt(id, 10)
	h.render(w, r, http.StatusOK, "reactivation", "Reactivation "+strconv.FormatInt(id, 10),
		reactivationPage{R: v, Progress: base + "/progress", P: reactivationProgress(v.Reactivation)})
}

// reactivationProgress returns the progress of run, with the fields of its page. The bar's
// end is the run's limit; a run up to now has none.
func reactivationProgress(run *redrive.Reactivation) progressJSON {
	p := progressJSON{State: string(run.State), Running: run.State == redrive.ReactivationRunning, Value: run.Read,
		Fields: map[string]string{
			"state":         string(run.State),
			"read":          strconv.FormatInt(run.Read, 10),
			"reingested":    strconv.FormatInt(run.Reingested, 10),
			"duplicates":    strconv.FormatInt(run.Duplicates, 10),
			"still_failing": strconv.FormatInt(run.StillFailing, 10),
			"percent":       "",
			"error":         "",
			"finished":      "",
		}}
	if run.Limit != nil {
		p.Max = *run.Limit
		p.Fields["percent"] = percentText(run.Read, *run.Limit)
	}
	if run.State == redrive.ReactivationDone { // a run that read less than its limit reached the topic's end
		p.Max = max(p.Max, run.Read, 1)
		p.Value, p.Fields["percent"] = p.Max, "100"
	}
	if run.Error != nil {
		p.Fields["error"] = visible(*run.Error)
	}
	if run.FinishedAt != nil {
		p.Fields["finished"] = run.FinishedAt.UTC().Format(timeLayout)
	}
	return p
}

// getReactivationProgress serves a run's progress as JSON, for the run page's script.
func (h *handler) getReactivationProgress(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		http.Error(w, "no such run", http.StatusNotFound)
		return
	}
	v, err := h.core.Reactivation(r.Context(), id)
	switch {
	case errors.Is(err, redrive.ErrNotFound):
		http.Error(w, "no such run", http.StatusNotFound)
		return
	case err != nil:
		h.cfg.Logger.Error("web: reactivation progress", "error", err, "path", r.URL.Path)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	writeProgress(w, reactivationProgress(v.Reactivation))
}
