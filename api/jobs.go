package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/operator"
)

// jobJSON is a job with its progress.
type jobJSON struct {
	ID     uuid.UUID `json:"id"`
	Action string    `json:"action"`
	// TargetTopic is where a resend_to job sends the failures; null for other actions.
	TargetTopic *string `json:"target_topic"`
	// TargetCluster is the Kafka cluster a resend_to job sends to; null: each failure's own.
	TargetCluster *string          `json:"target_cluster"`
	State         redrive.JobState `json:"state"`
	Principal     string           `json:"principal"`
	Reason        *string          `json:"reason"`
	Selection     map[string]any   `json:"selection"`
	RateLimit     float64          `json:"rate_limit"`
	Total         int64            `json:"total"`
	Done          int64            `json:"done"`
	Skipped       int64            `json:"skipped"`
	Failed        int64            `json:"failed"`
	Remaining     int64            `json:"remaining"`
	// Rate is the items acted on per second since the job started.
	Rate             float64    `json:"rate"`
	ETA              *time.Time `json:"eta"`
	CreatedAt        time.Time  `json:"created_at"`
	PreviewExpiresAt time.Time  `json:"preview_expires_at"`
	StartedAt        *time.Time `json:"started_at"`
	FinishedAt       *time.Time `json:"finished_at"`
	UpdatedAt        time.Time  `json:"updated_at"`
}

func newJobJSON(v *operator.JobView) jobJSON {
	j := v.Job
	return jobJSON{ID: j.ID, Action: j.Action, TargetTopic: j.TargetTopic, TargetCluster: j.TargetCluster, State: j.State, Principal: j.Principal, Reason: j.Reason,
		Selection: j.Selection, RateLimit: j.RateLimit, Total: j.Total, Done: j.Done, Skipped: j.Skipped,
		Failed: j.Failed, Remaining: j.Remaining(), Rate: v.Rate, ETA: v.ETA, CreatedAt: j.CreatedAt,
		PreviewExpiresAt: j.PreviewExpiresAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, UpdatedAt: j.UpdatedAt}
}

// listJobs serves GET /jobs.
func (a *api) listJobs(w http.ResponseWriter, r *http.Request) {
	limit, cursor, err := pageParams(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.core.ListJobs(r.Context(), limit, cursor, reader(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pageOf(p.Items, newJobJSON, p.Next))
}

// jobBody is the body of POST /jobs: an action on ids or a filter.
type jobBody struct {
	Action    operator.Action       `json:"action"`
	IDs       []string              `json:"ids"`
	Filter    *operator.FilterInput `json:"filter"`
	Reason    *string               `json:"reason"`
	RateLimit float64               `json:"rate_limit"`
	// TargetTopic is the topic of a resend_to job.
	TargetTopic string `json:"target_topic"`
	// TargetCluster is the Kafka cluster of a resend_to job; empty: each failure's own.
	TargetCluster string `json:"target_cluster"`
}

// previewJSON is the answer to POST /jobs.
type previewJSON struct {
	Job jobJSON `json:"job"`
	// Token starts the job until job.preview_expires_at; it is shown only here.
	Token string `json:"token"`
}

// previewJob serves POST /jobs.
func (a *api) previewJob(w http.ResponseWriter, r *http.Request) {
	var body jobBody
	_, err := parseQuery(r)
	if err == nil {
		err = a.decodeBody(w, r, &body, false)
	}
	req := operator.JobRequest{Action: body.Action, Principal: principal(r).Name, Reason: deref(body.Reason), RateLimit: body.RateLimit,
		TargetTopic: body.TargetTopic, TargetCluster: body.TargetCluster, Payload: reader(r).Payload}
	if err == nil {
		req.Selection, err = selectionOf(body.IDs, body.Filter, operator.MaxJobIDs, "job")
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.core.PreviewJob(r.Context(), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", Prefix+"/jobs/"+p.Job.ID.String())
	writeJSON(w, http.StatusCreated, previewJSON{Job: newJobJSON(&operator.JobView{Job: p.Job}), Token: p.Token})
}

// jobDetail is a job with its audit entries.
type jobDetail struct {
	jobJSON
	Audit []auditJSON `json:"audit"`
}

// getJob serves GET /jobs/{id}.
func (a *api) getJob(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idOnly(w, r)
	if !ok {
		return
	}
	j, err := a.core.Job(r.Context(), id, reader(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	audit, err := a.core.JobAudit(r.Context(), id, reader(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobDetail{jobJSON: newJobJSON(j), Audit: auditListJSON(audit)})
}

// listJobAudit serves GET /jobs/{id}/audit: every audit entry of a job, oldest first, paged.
func (a *api) listJobAudit(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	var limit int
	var cursor string
	if err == nil {
		limit, cursor, err = pageParams(r)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.core.JobAuditPage(r.Context(), id, limit, cursor, reader(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pageOf(p.Items, auditEntryJSON, p.Next))
}

// jobItemJSON is one pinned failure of a job.
type jobItemJSON struct {
	Seq       int64     `json:"seq"`
	FailureID uuid.UUID `json:"failure_id"`
	// Outcome is done, skipped or failed; null until the job reaches the item.
	Outcome *string    `json:"outcome"`
	Detail  *string    `json:"detail"`
	DoneAt  *time.Time `json:"done_at"`
}

// listJobItems serves GET /jobs/{id}/items.
func (a *api) listJobItems(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	var q map[string][]string
	if err == nil {
		q, err = parseQuery(r, []string{"outcome", "limit", "cursor"})
	}
	req := operator.JobItemsRequest{JobID: id, Outcome: first(q["outcome"])}
	if err == nil {
		req.Limit, err = parseLimit(q)
	}
	if c := first(q["cursor"]); err == nil && c != "" {
		if req.After, err = strconv.ParseInt(c, 10, 64); err != nil || req.After < 0 {
			err = badRequest("cursor", "not a cursor of this list: pass next_cursor unchanged")
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.core.JobItems(r.Context(), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pageOf(p.Items, newJobItemJSON, seqCursor(p.Next)))
}

func newJobItemJSON(it *redrive.JobItem) jobItemJSON {
	out := jobItemJSON{Seq: it.Seq, FailureID: it.FailureID, Detail: it.Detail, DoneAt: it.DoneAt}
	if it.Outcome != "" {
		o := string(it.Outcome)
		out.Outcome = &o
	}
	return out
}

// tokenBody is the body of POST /jobs/{id}/start.
type tokenBody struct {
	Token string `json:"token"`
}

// startJob serves POST /jobs/{id}/start.
func (a *api) startJob(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		_, err = parseQuery(r)
	}
	var body tokenBody
	if err == nil {
		err = a.decodeBody(w, r, &body, false)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	j, err := a.core.StartJob(r.Context(), id, body.Token, reader(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newJobJSON(&operator.JobView{Job: j}))
}

// pauseJob, resumeJob and cancelJob serve POST /jobs/{id}/pause, resume and cancel.
func (a *api) pauseJob(w http.ResponseWriter, r *http.Request)  { a.changeJob(w, r, "pause") }
func (a *api) resumeJob(w http.ResponseWriter, r *http.Request) { a.changeJob(w, r, "resume") }
func (a *api) cancelJob(w http.ResponseWriter, r *http.Request) { a.changeJob(w, r, "cancel") }

func (a *api) changeJob(w http.ResponseWriter, r *http.Request, op string) {
	id, err := pathID(r)
	if err == nil {
		_, err = parseQuery(r)
	}
	var body struct{}
	if err == nil {
		err = a.decodeBody(w, r, &body, true)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	j, err := a.core.ChangeJob(r.Context(), id, op, reader(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newJobJSON(&operator.JobView{Job: j}))
}
