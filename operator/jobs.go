package operator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/store"
)

// Bounds of jobs.
const (
	// MaxJobIDs bounds the ids of one job by ids (a job by filter has no bound).
	MaxJobIDs = 100000
	// DefaultJobRate is the rate of a job that names none, in items per second.
	DefaultJobRate = 200
	// MinJobRate is the lowest rate a job may name, in items per second (one item every 100 s).
	MinJobRate = 0.01
	// MaxJobRate bounds a job's rate, in items per second.
	MaxJobRate = 100000
	// DefaultPreviewTTL is how long a preview's token starts its job.
	DefaultPreviewTTL = 15 * time.Minute
)

// JobRequest asks for a job: an action on a selection, previewed first.
type JobRequest struct {
	Action    Action
	Selection Selection
	Principal string
	// Reason is required to close, at most MaxReasonLen characters.
	Reason string
	// RateLimit is the most items per second the job acts on, from MinJobRate to MaxJobRate.
	// Defaults to DefaultJobRate.
	RateLimit float64
	// TargetTopic is the topic of a ResendTo job: it must be in Config.RepairTopics.
	TargetTopic string
	// TargetCluster is the Kafka cluster of a ResendTo job; "" is each failure's own. Another
	// cluster must be reachable from every cluster the selection may hold along an allowed
	// route (Config.CrossCluster).
	TargetCluster string
	// Payload is the asker's payload permission: a filter's criteria follow the
	// confidentiality policy (as ListRequest.Reader), and so does the preview's selection.
	Payload bool
}

// JobPreview is a job whose selection is pinned, waiting for its token.
type JobPreview struct {
	Job *redrive.Job
	// Token starts the job (StartJob) until Job.PreviewExpiresAt; it is not stored, only its
	// hash, so it is shown once.
	Token string
}

// PreviewJob pins the selection of req in a new job and returns it with the token that starts
// it. The job acts on exactly the failures pinned now: for a filter, the open failures it
// selects at this moment, oldest first; for ids, those ids (one that does not exist, or is no
// longer open when the job reaches it, is skipped with the reason). Bad input is an
// *InputError and creates nothing.
func (c *Core) PreviewJob(ctx context.Context, req JobRequest) (*JobPreview, error) {
	reason, err := CheckText("reason", req.Reason, MaxReasonLen)
	if err != nil {
		return nil, err
	}
	switch {
	case req.Action != Retry && req.Action != Close && req.Action != ResendTo:
		return nil, invalid("action", "%q is not retry, close or resend_to", clip.Text(string(req.Action), clip.Default))
	case req.Action == ResendTo && req.TargetTopic == "":
		return nil, invalid("target_topic", "required to resend to another topic")
	case req.Action == ResendTo && !slices.Contains(c.cfg.RepairTopics, req.TargetTopic):
		return nil, invalid("target_topic", "%q is not among the topics failures may be sent to (-repair-topics)", clip.Text(req.TargetTopic, clip.Default))
	case req.Action != ResendTo && req.TargetTopic != "":
		return nil, invalid("target_topic", "only a resend_to job has a target topic")
	case req.Action != ResendTo && req.TargetCluster != "":
		return nil, invalid("target_cluster", "only a resend_to job has a target cluster")
	case reason == "" && req.Action == Close:
		return nil, invalid("reason", "required: say why the failures are closed")
	case req.RateLimit != 0 && !(req.RateLimit >= MinJobRate && req.RateLimit <= MaxJobRate):
		return nil, invalid("rate_limit", "%g items per second is not between %g and %d (0 or none for the default, %d)", req.RateLimit, MinJobRate, MaxJobRate, DefaultJobRate)
	case req.Action != Close && c.cfg.Resender == nil:
		return nil, fmt.Errorf("%w: resending is not configured on this server", redrive.ErrUnavailable)
	}
	if req.RateLimit == 0 {
		req.RateLimit = DefaultJobRate
	}
	sel := req.Selection
	described := map[string]any{}
	switch {
	case sel.IDs != nil && sel.Filter != nil:
		return nil, invalid("filter", "give ids or filter, not both")
	case sel.Filter != nil:
		if sel.Filter.IsZero() {
			return nil, invalid("filter", "empty: a job by filter needs at least one criterion")
		}
		if err := c.checkFilter(*sel.Filter, Reader{Principal: req.Principal, Payload: req.Payload}); err != nil {
			return nil, err
		}
		described["filter"] = describeFilter(*sel.Filter)
	case len(sel.IDs) == 0:
		return nil, invalid("ids", "empty: give ids or a filter")
	case len(sel.IDs) > MaxJobIDs:
		return nil, invalid("ids", "%d ids, at most %d per job (or use a filter)", len(sel.IDs), MaxJobIDs)
	default:
		described["ids"] = len(store.DistinctIDs(sel.IDs))
	}
	if err := c.checkTargetCluster(req.TargetCluster, sel.Filter); err != nil {
		return nil, err
	}
	if req.Principal == "" {
		return nil, errors.New("preview job: a principal is required")
	}
	token := make([]byte, 32)
	_, _ = rand.Read(token) // never fails (crypto/rand)
	now := c.cfg.Now()
	qctx, cancel := c.actionContext(ctx)
	defer cancel()
	var target *string
	if req.TargetTopic != "" {
		target = &req.TargetTopic
	}
	var targetCluster *string
	if req.TargetCluster != "" {
		targetCluster = &req.TargetCluster
		described["target_cluster"] = req.TargetCluster
	}
	pinFilter, pinIDs := sel.Filter, sel.IDs
	if sel.Filter != nil && sel.Filter.PayloadField != "" {
		// A decoded field search: the core decodes the open candidates and pins exactly the
		// matches, oldest first, as the store pins a filter's.
		rctx, rcancel := c.queryContext(ctx)
		ids, err := c.decodedIDs(rctx, *sel.Filter, actionStates)
		rcancel()
		if err != nil {
			return nil, err
		}
		pinFilter, pinIDs = nil, ids
		if pinIDs == nil {
			pinIDs = []uuid.UUID{}
		}
	}
	job, err := c.store.CreateJob(qctx, store.CreateJobParams{
		Action: string(req.Action), TargetTopic: target, TargetCluster: targetCluster, Filter: pinFilter, IDs: pinIDs, Principal: req.Principal, Reason: reason,
		Selection: described, RateLimit: req.RateLimit, Token: token, Now: now, ExpiresAt: now.Add(c.cfg.PreviewTTL),
	})
	if err != nil {
		return nil, fromStore(err)
	}
	job, _ = c.redactJob(job, Reader{Principal: req.Principal, Payload: req.Payload})
	return &JobPreview{Job: job, Token: base64.RawURLEncoding.EncodeToString(token)}, nil
}

// StartJob runs the previewed job with id when token is its preview's token and the preview
// has not expired; any instance then picks it up. A wrong, altered or expired token is an
// *InputError on "token" and changes nothing; a job that is not a preview any more wraps
// redrive.ErrConflict. The job is returned as reader may see it (JobView).
func (c *Core) StartJob(ctx context.Context, id uuid.UUID, token string, reader Reader) (*redrive.Job, error) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) != 32 {
		return nil, invalid("token", "not a job token: pass the token of the job's preview unchanged")
	}
	qctx, cancel := c.actionContext(ctx)
	defer cancel()
	job, err := c.store.StartJob(qctx, id, raw, reader.Principal, c.cfg.Now())
	if err != nil {
		return nil, jobError(err)
	}
	job, _ = c.redactJob(job, reader)
	return job, nil
}

// ChangeJob pauses, resumes or cancels the job with id (op "pause", "resume" or "cancel"), for
// reader, and returns the job as reader may see it (JobView).
func (c *Core) ChangeJob(ctx context.Context, id uuid.UUID, op string, reader Reader) (*redrive.Job, error) {
	switch op {
	case "pause", "resume", "cancel":
	default:
		return nil, invalid("operation", "%q is not pause, resume or cancel", clip.Text(op, clip.Default))
	}
	qctx, cancel := c.actionContext(ctx)
	defer cancel()
	job, err := c.store.ChangeJobState(qctx, id, op, reader.Principal, c.cfg.Now())
	if err != nil {
		return nil, jobError(err)
	}
	job, _ = c.redactJob(job, reader)
	return job, nil
}

// jobError turns the store's job errors into the core's.
func jobError(err error) error {
	var se *redrive.JobStateError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redrive.ErrTokenRefused):
		detail := err.Error()
		if len(detail) > len(redrive.ErrTokenRefused.Error())+2 {
			detail = detail[len(redrive.ErrTokenRefused.Error())+2:]
		}
		return invalid("token", "%s", detail)
	case errors.As(err, &se):
		return fmt.Errorf("%w: %s", redrive.ErrConflict, se.Error())
	}
	return fromStore(err)
}

// JobView is a job with its progress, as its reader may see it: the terms of its selection's
// filter that could hold payload bytes read HiddenTerm for a reader who may not see them.
type JobView struct {
	*redrive.Job
	// SelectionHidden says that terms of the selection's filter are hidden (HiddenTerm): the
	// selection cannot be turned back into a filter.
	SelectionHidden bool
	// Rate is the items acted on per second since the job started; 0 before.
	Rate float64
	// ETA is when the job should be done at that rate; nil when unknown or finished.
	ETA *time.Time
	// PreviewExpired says a preview's token can no longer start it.
	PreviewExpired bool
}

// jobView returns j with its progress at now, as reader may see it.
func (c *Core) jobView(j *redrive.Job, now time.Time, reader Reader) *JobView {
	v := newJobView(j, now)
	v.Job, v.SelectionHidden = c.redactJob(j, reader)
	return v
}

// newJobView computes the progress of j at now.
func newJobView(j *redrive.Job, now time.Time) *JobView {
	v := &JobView{Job: j, PreviewExpired: j.State == redrive.JobPreview && now.After(j.PreviewExpiresAt)}
	acted := j.Done + j.Skipped + j.Failed
	if j.StartedAt != nil && acted > 0 {
		end := now
		if j.FinishedAt != nil {
			end = *j.FinishedAt
		}
		if secs := end.Sub(*j.StartedAt).Seconds(); secs > 0 {
			v.Rate = float64(acted) / secs
		}
	}
	if j.State == redrive.JobRunning && v.Rate > 0 {
		eta := now.Add(time.Duration(float64(j.Remaining()) / v.Rate * float64(time.Second)))
		v.ETA = &eta
	}
	return v
}

// Job returns the job with id and its progress as reader may see it, or an error wrapping
// redrive.ErrNotFound.
func (c *Core) Job(ctx context.Context, id uuid.UUID, reader Reader) (*JobView, error) {
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	j, err := c.store.JobByID(qctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	return c.jobView(j, c.cfg.Now(), reader), nil
}

// JobPage is a page of jobs, newest first.
type JobPage struct {
	Items []JobView
	Next  string
}

// ListJobs returns a page of jobs, newest first, as reader may see them.
func (c *Core) ListJobs(ctx context.Context, limit int, cursor string, reader Reader) (*JobPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	var after *redrive.JobPosition
	if cursor != "" {
		p, err := decodeJobCursor(cursor)
		if err != nil {
			return nil, err
		}
		after = p
	}
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	jobs, more, err := c.store.ListJobs(qctx, after, limit)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	page := &JobPage{Items: make([]JobView, len(jobs))}
	for i := range jobs {
		page.Items[i] = *c.jobView(&jobs[i], now, reader)
	}
	if more && len(jobs) > 0 {
		last := jobs[len(jobs)-1]
		page.Next = encodeJobCursor(redrive.JobPosition{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	return page, nil
}

// JobItemsRequest selects a page of a job's items.
type JobItemsRequest struct {
	JobID uuid.UUID
	// Outcome is done, skipped, failed, pending, or "" for all.
	Outcome string
	// After is the Next of the previous page, a sequence number; 0 for the first page.
	After int64
	Limit int
}

// JobItemsPage is a page of a job's items in order.
type JobItemsPage struct {
	Items []redrive.JobItem
	// Next is the After of the following page; 0 on the last page.
	Next int64
}

// JobItems returns a page of the items of a job with their outcomes.
func (c *Core) JobItems(ctx context.Context, req JobItemsRequest) (*JobItemsPage, error) {
	switch req.Outcome {
	case "", "done", "skipped", "failed", "pending":
	default:
		return nil, invalid("outcome", "%q is not done, skipped, failed or pending", clip.Text(req.Outcome, clip.Default))
	}
	if req.After < 0 {
		return nil, invalid("after", "must not be negative")
	}
	limit, err := pageLimit(req.Limit)
	if err != nil {
		return nil, err
	}
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	if _, err := c.store.JobByID(qctx, req.JobID); err != nil {
		return nil, fromStore(err)
	}
	items, more, err := c.store.JobItems(qctx, store.JobItemsParams{JobID: req.JobID, Outcome: req.Outcome, After: req.After, Limit: limit})
	if err != nil {
		return nil, err
	}
	page := &JobItemsPage{Items: items}
	if more && len(items) > 0 {
		page.Next = items[len(items)-1].Seq
	}
	return page, nil
}

// JobAudit returns the audit entries of a job (store.Store.JobAudit): its own first, then its
// items', each part oldest first, at most MaxAudit, their details as reader may see them.
func (c *Core) JobAudit(ctx context.Context, id uuid.UUID, reader Reader) ([]redrive.AuditEntry, error) {
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	entries, err := c.store.JobAudit(qctx, id, MaxAudit)
	if err != nil {
		return nil, err
	}
	c.redactAudit(entries, reader)
	return entries, nil
}

// AuditPage is a page of audit entries, oldest first.
type AuditPage struct {
	Items []redrive.AuditEntry
	// Next is the cursor of the next page; empty on the last.
	Next string
}

// JobAuditPage returns a page of every audit entry of job id — its own and its items', in the
// order they were written — after the page whose Next cursor is (the first page when empty).
// An unknown job is redrive.ErrNotFound. The details are as reader may see them.
func (c *Core) JobAuditPage(ctx context.Context, id uuid.UUID, limit int, cursor string, reader Reader) (*AuditPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	var after *redrive.AuditPosition
	if cursor != "" {
		if after, err = decodeAuditCursor(cursor); err != nil {
			return nil, err
		}
	}
	if _, err := c.Job(ctx, id, reader); err != nil {
		return nil, err
	}
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	entries, next, err := c.store.JobAuditPage(qctx, id, after, limit)
	if err != nil {
		return nil, err
	}
	c.redactAudit(entries, reader)
	page := &AuditPage{Items: entries}
	if next != nil {
		page.Next = encodeAuditCursor(*next)
	}
	return page, nil
}

// TargetClusters returns the configured clusters that a resend_to job of the selection may
// send to, in configuration order: those checkTargetCluster accepts for the filter f (nil for a
// selection of ids, whose failures may be of any cluster). A form offers these.
func (c *Core) TargetClusters(f *redrive.Filter) []string {
	var out []string
	for _, name := range c.Clusters() {
		if c.checkTargetCluster(name, f) == nil {
			out = append(out, name)
		}
	}
	return out
}

// checkTargetCluster refuses a target cluster that is not configured, or that a failure of the
// selection could reach only along a route that is not allowed: the selection's clusters are
// those its filter names, else every configured cluster.
func (c *Core) checkTargetCluster(target string, f *store.Filter) error {
	if target == "" {
		return nil
	}
	clusters := c.Clusters()
	if !slices.Contains(clusters, target) {
		return invalid("target_cluster", "%q is not a configured cluster (%s)", clip.Text(target, clip.Default), strings.Join(clusters, ", "))
	}
	from := clusters
	if f != nil && len(f.Clusters) > 0 {
		from = f.Clusters
	}
	for _, src := range from {
		if src == target {
			continue
		}
		if c.cfg.CrossCluster == nil || !c.cfg.CrossCluster(src, target) {
			return invalid("target_cluster", "resends from cluster %q to cluster %q are not allowed (cross_cluster in the clusters file); filter by cluster to select failures of allowed clusters only",
				clip.Text(src, clip.Default), target)
		}
	}
	return nil
}
