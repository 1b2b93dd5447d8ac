package operator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/store"
)

// Bounds of jobs.
const (
	// MaxJobIDs bounds the ids of one job by ids (a job by filter has no bound).
	MaxJobIDs = 100000
	// DefaultJobRate is the rate of a job that names none, in items per second.
	DefaultJobRate = 200
	// MaxJobRate bounds a job's rate.
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
	// RateLimit is the most items per second the job acts on. Defaults to DefaultJobRate.
	RateLimit float64
	// TargetTopic is the topic of a ResendTo job: it must be in Config.RepairTopics.
	TargetTopic string
	// Payload is the asker's payload permission: a filter's criteria follow the
	// confidentiality policy (as ListRequest.Reader), and so does the preview's selection.
	Payload bool
}

// JobPreview is a job whose selection is pinned, waiting for its token.
type JobPreview struct {
	Job *store.Job
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
	case reason == "" && req.Action == Close:
		return nil, invalid("reason", "required: say why the failures are closed")
	case req.RateLimit < 0 || req.RateLimit > MaxJobRate || math.IsNaN(req.RateLimit):
		return nil, invalid("rate_limit", "%g is not between 0 (the default, %d per second) and %d", req.RateLimit, DefaultJobRate, MaxJobRate)
	case req.Action != Close && c.cfg.Resender == nil:
		return nil, fmt.Errorf("%w: resending is not configured on this server", ErrUnavailable)
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
	job, err := c.store.CreateJob(qctx, store.CreateJobParams{
		Action: string(req.Action), TargetTopic: target, Filter: sel.Filter, IDs: sel.IDs, Principal: req.Principal, Reason: reason,
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
// ErrConflict. The job is returned as reader may see it (JobView).
func (c *Core) StartJob(ctx context.Context, id uuid.UUID, token string, reader Reader) (*store.Job, error) {
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
func (c *Core) ChangeJob(ctx context.Context, id uuid.UUID, op string, reader Reader) (*store.Job, error) {
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
	var se *store.JobStateError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrTokenRefused):
		detail := err.Error()
		if len(detail) > len(store.ErrTokenRefused.Error())+2 {
			detail = detail[len(store.ErrTokenRefused.Error())+2:]
		}
		return invalid("token", "%s", detail)
	case errors.As(err, &se):
		return fmt.Errorf("%w: %s", ErrConflict, se.Error())
	}
	return fromStore(err)
}

// JobView is a job with its progress, as its reader may see it: the terms of its selection's
// filter that could hold payload bytes read HiddenTerm for a reader who may not see them.
type JobView struct {
	*store.Job
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
func (c *Core) jobView(j *store.Job, now time.Time, reader Reader) *JobView {
	v := newJobView(j, now)
	v.Job, v.SelectionHidden = c.redactJob(j, reader)
	return v
}

// newJobView computes the progress of j at now.
func newJobView(j *store.Job, now time.Time) *JobView {
	v := &JobView{Job: j, PreviewExpired: j.State == store.JobPreview && now.After(j.PreviewExpiresAt)}
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
	if j.State == store.JobRunning && v.Rate > 0 {
		eta := now.Add(time.Duration(float64(j.Remaining()) / v.Rate * float64(time.Second)))
		v.ETA = &eta
	}
	return v
}

// Job returns the job with id and its progress as reader may see it, or an error wrapping
// ErrNotFound.
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
	var after *store.JobPosition
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
		page.Next = encodeJobCursor(store.JobPosition{CreatedAt: last.CreatedAt, ID: last.ID})
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
	Items []store.JobItem
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
func (c *Core) JobAudit(ctx context.Context, id uuid.UUID, reader Reader) ([]store.AuditEntry, error) {
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
	Items []store.AuditEntry
	// Next is the cursor of the next page; empty on the last.
	Next string
}

// JobAuditPage returns a page of every audit entry of job id — its own and its items', in the
// order they were written — after the page whose Next cursor is (the first page when empty).
// An unknown job is ErrNotFound. The details are as reader may see them.
func (c *Core) JobAuditPage(ctx context.Context, id uuid.UUID, limit int, cursor string, reader Reader) (*AuditPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	var after *store.AuditPosition
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
	entries, more, err := c.store.JobAuditPage(qctx, id, after, limit)
	if err != nil {
		return nil, err
	}
	c.redactAudit(entries, reader)
	page := &AuditPage{Items: entries}
	if more && len(entries) > 0 {
		last := entries[len(entries)-1]
		page.Next = encodeAuditCursor(store.AuditPosition{At: last.At, ID: last.ID})
	}
	return page, nil
}

// Previews whose token expired more than previewKeep ago are deleted, with their pinned items,
// by a sweep every previewSweepEvery on every instance that runs jobs.
const (
	previewKeep       = 24 * time.Hour
	previewSweepEvery = 10 * time.Minute
)

// JobRunnerConfig configures RunJobs.
type JobRunnerConfig struct {
	// Owner names this instance in the jobs it holds. Required.
	Owner string
	// PollInterval is the time between two looks for a job to run. Defaults to 1s.
	PollInterval time.Duration
	// Lease is how long a job stays with this instance without news from it; another
	// instance resumes it after that. Defaults to 60s.
	Lease time.Duration
	// BatchSize bounds the items acted on and recorded at once. Defaults to 500.
	BatchSize int
	// Concurrency is the number of batches of a job in flight at once. Defaults to 4.
	Concurrency int
}

// RunJobs runs jobs until ctx ends: it claims the oldest running job that no other instance
// holds (SKIP LOCKED), acts on its items in order in batches at the job's rate, records each
// batch's outcomes with the job's progress in one transaction, and looks for the next job.
// An instance that stops (or dies) leaves its job to be resumed after the last recorded batch
// by whichever instance claims it next; an item whose action applied before the stop is
// counted done (by its audit entry), never acted on twice: the failure's state no longer
// allows the action. It also deletes previews that expired a day ago.
func (c *Core) RunJobs(ctx context.Context, cfg JobRunnerConfig) error {
	if cfg.Owner == "" {
		return errors.New("run jobs: invalid config: Owner is required")
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.Lease == 0 {
		cfg.Lease = 60 * time.Second
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 500
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 4
	}
	t := time.NewTicker(cfg.PollInterval)
	defer t.Stop()
	var swept time.Time
	for {
		if now := c.cfg.Now(); now.Sub(swept) >= previewSweepEvery {
			swept = now
			if n, err := c.store.DeleteExpiredPreviews(ctx, now.Add(-previewKeep)); err != nil && ctx.Err() == nil {
				c.log.Error("jobs: deleting expired previews failed", "error", err)
			} else if n > 0 {
				c.log.Info("jobs: deleted expired previews", "count", n)
			}
		}
		for ctx.Err() == nil {
			now := c.cfg.Now()
			job, err := c.store.ClaimJob(ctx, cfg.Owner, now, now.Add(cfg.Lease))
			if err != nil {
				if ctx.Err() == nil {
					c.log.Error("jobs: claim failed", "error", err)
				}
				break
			}
			if job == nil {
				break
			}
			c.runJob(ctx, job, cfg)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// runJob acts on the items of job, held by cfg.Owner, until it is done, paused, canceled,
// taken over, or ctx ends (then the job is released for another instance). Up to
// cfg.Concurrency batches are in flight at once; each records its own outcomes, so a batch
// never waits for another's acknowledgements.
func (c *Core) runJob(ctx context.Context, job *store.Job, cfg JobRunnerConfig) {
	log := c.log.With("job", job.ID, "action", job.Action)
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := c.store.ReleaseJob(rctx, job.ID, cfg.Owner); err != nil {
			log.Error("jobs: release failed", "error", err)
		}
	}()
	batch := max(1, min(cfg.BatchSize, int(math.Ceil(job.RateLimit))))
	limiter := rate.NewLimiter(rate.Limit(job.RateLimit), batch)
	act := Action(job.Action)
	reason := ""
	if job.Reason != nil {
		reason = *job.Reason
	}
	var (
		wg       sync.WaitGroup
		stopped  atomic.Bool // a batch saw the lease lost, the job finish, or an error
		inflight = make(chan struct{}, cfg.Concurrency)
		pos      int64 // the last item handed to a batch
	)
	defer wg.Wait()
	for ctx.Err() == nil && !stopped.Load() {
		items, err := c.store.NextJobItems(ctx, job.ID, pos, batch)
		if err != nil {
			if ctx.Err() == nil {
				log.Error("jobs: reading items failed", "error", err)
			}
			return
		}
		if len(items) == 0 {
			wg.Wait()
			if err := c.store.FinishJobIfEmpty(ctx, job.ID, cfg.Owner, c.cfg.Now()); err != nil && ctx.Err() == nil {
				log.Error("jobs: finishing failed", "error", err)
			}
			return
		}
		pos = items[len(items)-1].Seq
		if err := limiter.WaitN(ctx, len(items)); err != nil {
			return
		}
		select {
		case inflight <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if stopped.Load() {
			<-inflight
			return
		}
		wg.Go(func() {
			defer func() { <-inflight }()
			if !c.runBatch(ctx, job, act, reason, items, cfg) {
				stopped.Store(true)
			}
		})
	}
}

// runBatch acts on one batch of items and records their outcomes. It reports false when the
// job must stop here: it is no longer this instance's to run, it finished, or the batch failed.
func (c *Core) runBatch(ctx context.Context, job *store.Job, act Action, reason string, items []store.JobItem, cfg JobRunnerConfig) bool {
	log := c.log.With("job", job.ID, "action", job.Action)
	results, err := c.actOnItems(ctx, job, act, reason, items)
	if err != nil {
		log.Error("jobs: batch failed; the job waits for the next claim", "error", err)
		return false
	}
	now := c.cfg.Now()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.QueryTimeout)
	defer cancel()
	updated, err := c.store.RecordJobItems(rctx, job.ID, cfg.Owner, results, now, now.Add(cfg.Lease))
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		log.Info("jobs: the job was paused, canceled or taken over; stopping here")
		return false
	case err != nil:
		log.Error("jobs: recording outcomes failed; the batch is redone after the lease", "error", err)
		return false
	case updated.State != store.JobRunning:
		log.Info("jobs: job finished", "state", updated.State, "done", updated.Done, "skipped", updated.Skipped, "failed", updated.Failed)
		return false
	}
	return true
}

// actOnItems applies the job's action to items and returns each item's outcome. An item
// refused because its state changed counts as done when the audit log shows this job's action
// applied to it (a batch redone after a crash), else as skipped.
func (c *Core) actOnItems(ctx context.Context, job *store.Job, act Action, reason string, items []store.JobItem) ([]store.JobItemResult, error) {
	ids := make([]uuid.UUID, len(items))
	for i, it := range items {
		ids[i] = it.FailureID
	}
	actx, cancel := c.actionContext(ctx)
	defer cancel()
	if act != Close && c.cfg.Resender == nil {
		return nil, fmt.Errorf("%w: resending is not configured on this instance", ErrUnavailable)
	}
	target := ""
	if job.TargetTopic != nil {
		target = *job.TargetTopic
	}
	outcomes, err := c.apply(actx, act, ids, job.Principal, reason, map[string]any{"job_id": job.ID.String()}, target)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]ItemOutcome, len(outcomes))
	var refused []uuid.UUID
	for _, o := range outcomes {
		byID[o.ID] = o
		if o.Outcome == OutcomeConflict {
			refused = append(refused, o.ID)
		}
	}
	acted := map[uuid.UUID]bool{}
	if len(refused) > 0 {
		if acted, err = c.store.JobActedOn(actx, job.ID, act.auditAction(), refused); err != nil {
			return nil, err
		}
	}
	results := make([]store.JobItemResult, len(items))
	for i, it := range items {
		o := byID[it.FailureID]
		r := store.JobItemResult{Seq: it.Seq}
		switch {
		case o.Outcome == act.Success(), acted[it.FailureID]:
			r.Outcome = store.JobItemDone
		case o.Outcome == OutcomeFailed:
			r.Outcome, r.Detail = store.JobItemFailed, o.Detail
		case o.Outcome == OutcomeNotFound:
			r.Outcome, r.Detail = store.JobItemSkipped, "no failure has this id (deleted since the preview?)"
		default:
			r.Outcome, r.Detail = store.JobItemSkipped, "state changed since the preview: "+o.Detail
		}
		results[i] = r
	}
	return results, nil
}
