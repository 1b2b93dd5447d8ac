package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/operator"
)

// Jobs: an action on a selection pinned by a preview, run in the background by the core's job
// runner, without the bulk cap of an immediate action. The pages are the job form and its
// preview (POST /jobs/new, POST /jobs/preview), the start (POST /jobs/{id}/start with the
// preview's token), the list (GET /jobs), the job (GET /jobs/{id}) with its progress as JSON
// for the page's script (GET /jobs/{id}/progress), and pause, resume and cancel.

// paramRate is the form field of a job's rate limit, in items per second.
const paramRate = "rate_limit"

// Form fields of a job's destination: a retry job with either is a resend_to job.
const (
	paramTargetTopic   = "target_topic"
	paramTargetCluster = "target_cluster"
)

// jobForm is a posted job request: an action form with a rate limit as typed, and for a
// retry the destination, "" for each failure's own topic and cluster.
type jobForm struct {
	actionForm
	Rate                       string
	TargetTopic, TargetCluster string
}

// action is the core's action of the job: a retry sent to another topic or cluster is a
// resend_to job, whose target the core checks (its topic among the repair topics, its cluster
// configured and reachable along an allowed route from the selection's clusters).
func (j jobForm) action() operator.Action {
	if j.Action == operator.Retry && (j.TargetTopic != "" || j.TargetCluster != "") {
		return operator.ResendTo
	}
	return j.Action
}

// request returns the core's job request of j, asked by principal at rate.
func (j jobForm) request(principal string, rate float64, payload bool) operator.JobRequest {
	return operator.JobRequest{Action: j.action(), Principal: principal, Reason: j.Reason, RateLimit: rate,
		Selection: j.selection(), Payload: payload, TargetTopic: j.TargetTopic, TargetCluster: j.TargetCluster}
}

// readJobForm reads a job form. Like readActionForm it reads and does not judge, but a rate
// that is not a number is an *operator.InputError.
func readJobForm(r *http.Request) (jobForm, float64, error) {
	a, err := readActionForm(r, "")
	j := jobForm{actionForm: a, Rate: strings.TrimSpace(r.PostFormValue(paramRate)),
		TargetTopic: r.PostFormValue(paramTargetTopic), TargetCluster: r.PostFormValue(paramTargetCluster)}
	if j.Action == operator.ResendTo {
		j.Action = operator.Retry // the form's own action; the destination makes it a resend_to
	}
	if err != nil {
		return j, 0, err
	}
	if j.Rate == "" {
		return j, 0, nil
	}
	rate, err := strconv.ParseFloat(j.Rate, 64)
	if err != nil {
		return j, 0, &operator.InputError{Field: paramRate, Detail: fmt.Sprintf("%q is not a number of items per second", clip.Text(j.Rate, clip.Default))}
	}
	return j, rate, nil
}

// jobPreviewPage is the data of the job form and of its preview.
type jobPreviewPage struct {
	J jobForm
	// Hidden carries the filter of a job by filter; FilterLink is the list it selects now.
	Hidden     []hiddenField
	FilterLink string
	// DefaultRate and MaxRate bound the rate field.
	DefaultRate, MaxRate int
	// Topics are the topics a retry job may send to instead of each failure's own (the repair
	// topics); Clusters the Kafka clusters it may send to, those the core allows for the
	// selection (TargetClusters), offered when the deployment has several. Destination says
	// whether the form asks for them (a retry job has repair topics to go to).
	Topics, Clusters []string
	MultiCluster     bool
	Destination      bool
	Error            string
	// Preview is the pinned job once previewed, with the Token that starts it (shown once).
	Preview *redrive.Job
	Token   string
}

func (h *handler) newJobPreviewPage(j jobForm) jobPreviewPage {
	p := jobPreviewPage{J: j, DefaultRate: operator.DefaultJobRate, MaxRate: operator.MaxJobRate}
	if j.Action == operator.Retry {
		p.Topics = h.core.RepairTopics()
		all := h.core.Clusters()
		p.MultiCluster = len(all) > 1
		if p.MultiCluster {
			var f *redrive.Filter
			if j.All {
				f = &j.Filter
			}
			p.Clusters = h.core.TargetClusters(f)
		}
		// A resend_to job names its topic: without repair topics there is no destination to offer.
		p.Destination = len(p.Topics) > 0
	}
	if p.J.Rate == "" {
		p.J.Rate = strconv.Itoa(operator.DefaultJobRate)
	}
	if j.All {
		p.Hidden = hiddenFields(j.Filter)
		p.FilterLink = filterLink(j.Filter)
	}
	return p
}

// jobTitle is the title of the job form of action a.
func jobTitle(a operator.Action) string {
	if a == operator.Close {
		return "Close as a job"
	}
	if a == operator.ResendTo {
		return "Resend as a job"
	}
	return "Retry as a job"
}

// postJobNew shows the job form for the posted selection: the reason and the rate limit, to
// be previewed. It asks nothing of the core; the preview does.
func (h *handler) postJobNew(w http.ResponseWriter, r *http.Request) {
	j, _, err := readJobForm(r)
	var ie *operator.InputError
	if err != nil && !errors.As(err, &ie) {
		h.refused(w, r, err)
		return
	}
	p := h.newJobPreviewPage(j)
	status := http.StatusOK
	if ie != nil {
		p.Error, status = ie.Error(), http.StatusBadRequest
	}
	h.render(w, r, status, "jobpreview", jobTitle(j.action()), p)
}

// postJobPreview pins the selection in a job (the core's preview) and shows the pinned count
// with the form that starts exactly that job. A request the core refuses goes back to the
// form with the core's reason.
func (h *handler) postJobPreview(w http.ResponseWriter, r *http.Request) {
	j, rate, err := readJobForm(r)
	var prev *operator.JobPreview
	if err == nil {
		prev, err = h.core.PreviewJob(r.Context(), j.request(sessionFrom(r.Context()).principal.Name, rate, reader(r).Payload))
	}
	p := h.newJobPreviewPage(j)
	var ie *operator.InputError
	switch {
	case errors.As(err, &ie):
		p.Error = ie.Error()
		h.render(w, r, ie.Status(), "jobpreview", jobTitle(j.action()), p)
		return
	case err != nil:
		h.refused(w, r, err)
		return
	}
	p.Preview, p.Token = prev.Job, prev.Token
	h.cfg.Logger.Info("web: job preview", "principal", prev.Job.Principal, "job", prev.Job.ID, "action", prev.Job.Action, "total", prev.Job.Total)
	h.render(w, r, http.StatusOK, "jobpreview", jobTitle(j.action()), p)
}

// jobID reads the job id of the address; false (after a 404 page) when it is not one.
func (h *handler) jobID(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil || len(r.PathValue("id")) != 36 {
		h.renderError(w, r, http.StatusNotFound, "There is no job with this id.")
		return uuid.UUID{}, false
	}
	return id, true
}

// jobRefused answers a job operation that the core refused: a conflict (the job's state does
// not allow it) or an input error with the core's text, a missing job with 404.
func (h *handler) jobRefused(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, redrive.ErrNotFound):
		h.renderError(w, r, http.StatusNotFound, "There is no job with this id.")
	case errors.Is(err, redrive.ErrConflict):
		h.renderError(w, r, http.StatusConflict, "The job's state does not allow this: "+strings.TrimPrefix(err.Error(), redrive.ErrConflict.Error()+": ")+".")
	default:
		h.refused(w, r, err)
	}
}

// postJobStart starts the previewed job with the preview's token, then shows the job.
func (h *handler) postJobStart(w http.ResponseWriter, r *http.Request) {
	id, ok := h.jobID(w, r)
	if !ok {
		return
	}
	principal := sessionFrom(r.Context()).principal.Name
	j, err := h.core.StartJob(r.Context(), id, r.PostFormValue("token"), reader(r))
	if err != nil {
		h.jobRefused(w, r, err)
		return
	}
	h.cfg.Logger.Info("web: job start", "principal", principal, "job", j.ID, "total", j.Total)
	http.Redirect(w, r, "/jobs/"+j.ID.String(), http.StatusSeeOther)
}

func (h *handler) postJobPause(w http.ResponseWriter, r *http.Request)  { h.changeJob(w, r, "pause") }
func (h *handler) postJobResume(w http.ResponseWriter, r *http.Request) { h.changeJob(w, r, "resume") }
func (h *handler) postJobCancel(w http.ResponseWriter, r *http.Request) { h.changeJob(w, r, "cancel") }

// changeJob pauses, resumes or cancels a job, then shows it again (post/redirect/get).
func (h *handler) changeJob(w http.ResponseWriter, r *http.Request, op string) {
	id, ok := h.jobID(w, r)
	if !ok {
		return
	}
	principal := sessionFrom(r.Context()).principal.Name
	j, err := h.core.ChangeJob(r.Context(), id, op, reader(r))
	if err != nil {
		h.jobRefused(w, r, err)
		return
	}
	h.cfg.Logger.Info("web: job "+op, "principal", principal, "job", j.ID, "state", j.State)
	http.Redirect(w, r, "/jobs/"+j.ID.String(), http.StatusSeeOther)
}

// deref returns *s, "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// jobsPage is the data of the job list.
type jobsPage struct {
	Jobs  []jobRow
	Pager pager
}

// jobRow is a job of the list with its progress.
type jobRow struct {
	operator.JobView
	Acted int64
	// Target is where a resend_to job sends: its topic, and its cluster when it names one
	// ("topic @ cluster").
	Target string
}

func (h *handler) getJobs(w http.ResponseWriter, r *http.Request) {
	cursor := r.URL.Query().Get(paramCursor)
	page, err := h.core.ListJobs(r.Context(), h.cfg.PageSize, cursor, reader(r))
	if err != nil {
		h.inputError(w, r, err, func(msg string) { h.renderError(w, r, http.StatusBadRequest, "This page address is not valid: "+msg) })
		return
	}
	p := jobsPage{}
	for _, j := range page.Items {
		row := jobRow{JobView: j, Acted: j.Done + j.Skipped + j.Failed, Target: deref(j.TargetTopic)}
		if c := deref(j.TargetCluster); c != "" {
			row.Target += " @ " + c
		}
		p.Jobs = append(p.Jobs, row)
	}
	p.Pager = forwardPager("/jobs", cursor, page.Next)
	h.render(w, r, http.StatusOK, "jobs", "Jobs", p)
}

// jobOutcomes are the item outcomes the job page filters by, "" for all.
var jobOutcomes = []string{"", "pending", "done", "skipped", "failed"}

// jobPage is the data of a job's page.
type jobPage struct {
	J     *operator.JobView
	Acted int64
	// Selection describes how the failures were selected, as name=value criteria or a count
	// of ids; FilterLink lists what the filter selects now.
	Selection  []string
	FilterLink string
	// Outcome filters Items; Outcomes links every filter.
	Outcome  string
	Outcomes []outcomeLink
	Items    []redrive.JobItem
	// Next and First are the addresses of the next and first page of items.
	Next, First string
	// Audit holds the job's own audit entries (preview, start, pause, resume, cancel); the
	// entries of the failures it changed, ItemAudit of them, show on each failure's page.
	Audit     []redrive.AuditEntry
	ItemAudit int
	// Progress is the address of the job's progress as JSON, polled while it runs; P is that
	// progress now, for the page's first rendering.
	Progress string
	P        progressJSON
	// TargetTopic and TargetCluster are where a resend_to job sends, "" for each failure's own.
	TargetTopic, TargetCluster string
}

// outcomeLink is one filter of a job's items.
type outcomeLink struct {
	Outcome, Label, Link string
	Current              bool
}

func (h *handler) getJob(w http.ResponseWriter, r *http.Request) {
	id, ok := h.jobID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	req := operator.JobItemsRequest{JobID: id, Outcome: q.Get("outcome"), Limit: h.cfg.PageSize}
	if a := q.Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			h.renderError(w, r, http.StatusBadRequest, "This page address is not valid: after: not a position of this list.")
			return
		}
		req.After = n
	}
	// The page reads the job, a page of its items and its audit: three reads of the core.
	j, err := h.core.Job(r.Context(), id, reader(r))
	if err != nil {
		h.jobRefused(w, r, err)
		return
	}
	items, err := h.core.JobItems(r.Context(), req)
	if err != nil {
		h.inputError(w, r, err, func(msg string) { h.renderError(w, r, http.StatusBadRequest, "This page address is not valid: "+msg) })
		return
	}
	audit, err := h.core.JobAudit(r.Context(), id, reader(r))
	if err != nil {
		h.serverError(w, r, "job audit", err)
		return
	}
	base := "/jobs/" + id.String()
	p := jobPage{J: j, Acted: j.Done + j.Skipped + j.Failed, Outcome: req.Outcome, Items: items.Items, Progress: base + "/progress", P: h.jobProgress(j)}
	for _, e := range audit {
		if e.FailureID == nil {
			p.Audit = append(p.Audit, e)
		} else {
			p.ItemAudit++
		}
	}
	p.TargetTopic, p.TargetCluster = deref(j.TargetTopic), deref(j.TargetCluster)
	p.Selection, p.FilterLink = describeSelection(j.Selection)
	if j.SelectionHidden { // hidden terms cannot be searched again
		p.FilterLink = ""
	}
	for _, o := range jobOutcomes {
		l := outcomeLink{Outcome: o, Label: o, Link: base, Current: o == req.Outcome}
		if o == "" {
			l.Label = "all"
		} else {
			l.Link += "?" + url.Values{"outcome": {o}}.Encode()
		}
		p.Outcomes = append(p.Outcomes, l)
	}
	if req.After != 0 {
		p.First = itemsLink(base, req.Outcome, 0)
	}
	if items.Next != 0 {
		p.Next = itemsLink(base, req.Outcome, items.Next)
	}
	h.render(w, r, http.StatusOK, "job", "Job "+id.String(), p)
}

// itemsLink is the address of a page of a job's items.
func itemsLink(base, outcome string, after int64) string {
	v := url.Values{}
	if outcome != "" {
		v.Set("outcome", outcome)
	}
	if after != 0 {
		v.Set("after", strconv.FormatInt(after, 10))
	}
	if len(v) == 0 {
		return base
	}
	return base + "?" + v.Encode()
}

// describeSelection renders a job's selection (as the core described it) as criteria, and
// for a filter the address of the list it selects now.
func describeSelection(sel map[string]any) ([]string, string) {
	var out []string
	link := ""
	if f, ok := sel["filter"].(map[string]any); ok {
		v := url.Values{}
		for name, val := range f {
			switch x := val.(type) {
			case string:
				v.Add(name, x)
			case []any:
				for _, e := range x {
					v.Add(name, fmt.Sprint(e))
				}
			default:
				v.Add(name, fmt.Sprint(x))
			}
		}
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			for _, val := range v[name] {
				out = append(out, name+"="+val)
			}
		}
		link = "/failures?" + v.Encode()
	}
	if n, ok := sel["ids"]; ok {
		out = append(out, fmt.Sprintf("%v selected failures", n))
	}
	return out, link
}

// progressJSON is the progress of a job or a reactivation run for the page's script: the
// values of the page's fields as text, and the progress bar's value and max (max 0 for a
// run without a known end).
type progressJSON struct {
	State string `json:"state"`
	// Running is true while the page should keep polling.
	Running bool              `json:"running"`
	Fields  map[string]string `json:"fields"`
	Value   int64             `json:"value"`
	Max     int64             `json:"max"`
}

// writeProgress sends p, never cached.
func writeProgress(w http.ResponseWriter, p progressJSON) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(p)
}

// jobProgress returns the progress of j, with the fields of the job page.
func (h *handler) jobProgress(j *operator.JobView) progressJSON {
	acted := j.Done + j.Skipped + j.Failed
	f := map[string]string{
		"state":     string(j.State),
		"done":      strconv.FormatInt(j.Done, 10),
		"skipped":   strconv.FormatInt(j.Skipped, 10),
		"failed":    strconv.FormatInt(j.Failed, 10),
		"remaining": strconv.FormatInt(j.Remaining(), 10),
		"percent":   percentText(acted, j.Total),
		"rate":      rateText(j.Rate),
		"eta":       "",
		"finished":  "",
	}
	if j.ETA != nil {
		f["eta"] = j.ETA.UTC().Format(timeLayout) + " (in " + humanDuration(j.ETA.Sub(h.cfg.Now())) + ")"
	}
	if j.FinishedAt != nil {
		f["finished"] = j.FinishedAt.UTC().Format(timeLayout)
	}
	return progressJSON{State: string(j.State), Running: j.State == redrive.JobRunning, Fields: f, Value: acted, Max: j.Total}
}

// percentText renders part of whole in whole percent, rounded down: 100 only when done.
func percentText(part, whole int64) string {
	if whole <= 0 {
		return "0"
	}
	return strconv.FormatInt(part*100/whole, 10)
}

// rateText renders a rate of items per second.
func rateText(r float64) string {
	if r == 0 {
		return "–"
	}
	return strconv.FormatFloat(r, 'f', 1, 64) + "/s"
}

// getJobProgress serves a job's progress as JSON, for the job page's script.
func (h *handler) getJobProgress(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	j, err := h.core.Job(r.Context(), id, reader(r))
	switch {
	case errors.Is(err, redrive.ErrNotFound):
		http.Error(w, "no such job", http.StatusNotFound)
		return
	case err != nil:
		h.cfg.Logger.Error("web: job progress", "error", err, "path", r.URL.Path)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	writeProgress(w, h.jobProgress(j))
}
