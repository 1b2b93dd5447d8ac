package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// The actions of jobs (operator.Action).
const (
	actionRetry    = "retry"
	actionClose    = "close"
	actionResendTo = "resend_to"
)

// jobRun is one job held by this instance.
type jobRun struct {
	r   *Runner
	job *redrive.Job
	log *slog.Logger
	// ctx ends when the job must stop: the runner stops, or the heartbeat saw the job paused,
	// canceled, finished or taken over.
	ctx context.Context
	// base is the runner's context: batches in flight settle after ctx ended.
	base context.Context

	mu   sync.Mutex
	mine map[int64]bool // claims this run took or took over and has not settled
	// limiter is the job's one rate limiter: its batches and the followers of its heads.
	limiter *rate.Limiter
}

func newJobRun(r *Runner, ctx context.Context, job *redrive.Job) *jobRun {
	return &jobRun{r: r, job: job, ctx: ctx, base: ctx, log: r.log.With("job", job.ID, "action", job.Action), mine: map[int64]bool{}}
}

// batchSize is the items of one batch: at most BatchSize, at most one second at the job's rate.
func (j *jobRun) batchSize() int {
	return max(1, min(j.r.cfg.BatchSize, int(math.Ceil(j.job.RateLimit))))
}

func (j *jobRun) own(id int64, yes bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if yes {
		j.mine[id] = true
	} else {
		delete(j.mine, id)
	}
}

func (j *jobRun) owns(id int64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.mine[id]
}

// runJob acts on the items of job, held by this instance, until it is done, paused, canceled,
// taken over, or ctx ends; then it releases the job.
func (r *Runner) runJob(ctx context.Context, job *redrive.Job) {
	if job.Action != actionClose && r.cfg.Publisher == nil {
		r.log.Error("jobs: this instance cannot send: released the job", "job", job.ID, "action", job.Action)
		r.release(ctx, job)
		return
	}
	jctx, stop := context.WithCancel(ctx)
	defer stop()
	j := newJobRun(r, jctx, job)
	j.base = ctx
	var hb sync.WaitGroup
	hb.Go(func() { j.heartbeat(stop) })
	j.run()
	stop()
	hb.Wait()
	if r.dead.Load() {
		return // as a crashed instance: the lease expires
	}
	r.release(ctx, job)
}

// release ends this instance's lease on job, so that any instance may claim it at once.
func (r *Runner) release(ctx context.Context, job *redrive.Job) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.store.ReleaseJob(rctx, job.ID, r.cfg.Owner); err != nil {
		r.log.Error("jobs: release failed", "job", job.ID, "error", err)
	}
}

// heartbeat renews the job's lease every Heartbeat and calls stop when the job is no longer
// this instance's to run (paused, canceled, finished, taken over) or ctx ends.
func (j *jobRun) heartbeat(stop context.CancelFunc) {
	t := time.NewTicker(j.r.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-j.ctx.Done():
			return
		case <-t.C:
		}
		if j.r.dead.Load() {
			stop()
			return
		}
		held, err := j.r.store.HeartbeatJob(j.ctx, j.job.ID, j.r.cfg.Owner, j.r.cfg.Now().Add(j.r.cfg.Lease))
		switch {
		case err != nil && j.ctx.Err() == nil:
			j.log.Error("jobs: heartbeat failed", "error", err)
		case err == nil && !held:
			j.log.Info("jobs: the job was paused, canceled, finished or taken over; stopping")
			stop()
			return
		}
	}
}

// run is the job's loop: batch after batch at the job's rate, then the claims that earlier
// holders left, then DONE.
func (j *jobRun) run() {
	size := j.batchSize()
	limiter := rate.NewLimiter(rate.Limit(j.job.RateLimit), size)
	j.limiter = limiter
	var (
		wg       sync.WaitGroup
		failed   atomic.Bool // a batch failed: stop, the job is claimed again later
		inflight = make(chan struct{}, j.r.cfg.Concurrency)
		pos      int64
	)
	// A batch holds one of the job's Concurrency slots and one of the instance's MaxBatches:
	// jobs waiting on their rate limits hold neither, and busy jobs take turns.
	acquire := func() bool {
		select {
		case inflight <- struct{}{}:
		case <-j.ctx.Done():
			return false
		}
		select {
		case j.r.batches <- struct{}{}:
			return true
		case <-j.ctx.Done():
			<-inflight
			return false
		}
	}
	release := func() { <-j.r.batches; <-inflight }
	defer wg.Wait()
	for j.ctx.Err() == nil && !failed.Load() && !j.r.dead.Load() {
		// Wait before claiming: a stop while waiting leaves nothing claimed.
		if err := limiter.WaitN(j.ctx, size); err != nil {
			return
		}
		if !acquire() {
			return
		}
		if j.r.dead.Load() {
			release()
			return
		}
		b, err := j.claim(pos, size)
		if err != nil {
			release()
			if !errors.Is(err, redrive.ErrLeaseLost) && j.ctx.Err() == nil {
				j.log.Error("jobs: claiming a batch failed; the job waits for the next claim", "error", err)
			}
			return
		}
		if b.Last == 0 {
			release()
			wg.Wait()
			if j.finish() {
				return
			}
			pos = 0 // claims settled meanwhile may have left items pending
			continue
		}
		pos = b.Last
		if b.ClaimID == 0 {
			release()
			if b.Job.State != redrive.JobRunning {
				return
			}
			continue
		}
		if j.r.abandon("after claim", callHook(j.r.cfg.Hooks.AfterClaim, j.ctx, b)) {
			release()
			return
		}
		if j.ctx.Err() != nil {
			// Stopped while claiming: send nothing, the items stay pending.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), j.r.cfg.BatchTimeout)
			if err := j.r.store.ReleaseJobClaim(rctx, j.job.ID, b.ClaimID); err != nil {
				j.log.Error("jobs: releasing a claim failed; the job's next holder settles it", "error", err)
			}
			cancel()
			release()
			return
		}
		j.own(b.ClaimID, true)
		wg.Go(func() {
			defer release()
			if !j.sendBatch(b) {
				failed.Store(true)
			}
		})
	}
}

func callHook(h func(context.Context, *store.JobBatch) error, ctx context.Context, b *store.JobBatch) error {
	if h == nil {
		return nil
	}
	return h(ctx, b)
}

// claim takes the next batch after pos: a close job's batch is closed and recorded at once.
func (j *jobRun) claim(pos int64, size int) (*store.JobBatch, error) {
	// A claim that the job's end interrupted could commit unseen: once started, it completes.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), j.r.cfg.BatchTimeout)
	defer cancel()
	now := j.r.cfg.Now()
	if j.job.Action == actionClose {
		reason := ""
		if j.job.Reason != nil {
			reason = *j.job.Reason
		}
		start := time.Now()
		b, err := j.r.store.CloseJobBatch(ctx, store.CloseJobBatchParams{JobID: j.job.ID, Owner: j.r.cfg.Owner, After: pos, Limit: size,
			Principal: j.job.Principal, Reason: reason, Details: map[string]any{"job_id": j.job.ID.String()}, Now: now})
		j.r.tracer.closed(j.job, start, b, err)
		return b, err
	}
	return j.r.store.ClaimJobBatch(ctx, store.ClaimJobBatchParams{JobID: j.job.ID, Owner: j.r.cfg.Owner, After: pos, Limit: size, Now: now})
}

// finish handles the end of the items: it settles the claims earlier holders left once they
// are old enough, waits for younger ones, and makes the job DONE when no item is pending. It
// reports whether the job's loop should end.
func (j *jobRun) finish() bool {
	claims, err := j.r.store.JobClaims(j.ctx, j.job.ID)
	if err != nil {
		if j.ctx.Err() == nil {
			j.log.Error("jobs: reading the job's claims failed", "error", err)
		}
		return true
	}
	waiting := false
	for _, c := range claims {
		if j.owns(c.ID) {
			continue
		}
		if j.r.cfg.Now().Sub(c.ClaimedAt) < j.r.cfg.ClaimGrace && c.Owner != j.r.cfg.Owner {
			waiting = true // maybe still sending on its instance
			continue
		}
		j.recoverClaim(j.ctx, c, true)
	}
	if waiting || len(claims) > 0 {
		select {
		case <-j.ctx.Done():
			return true
		case <-time.After(j.r.cfg.PollInterval):
		}
		return false
	}
	ctx, cancel := context.WithTimeout(j.ctx, j.r.cfg.BatchTimeout)
	defer cancel()
	job, err := j.r.store.FinishJob(ctx, j.job.ID, j.r.cfg.Owner, j.r.cfg.Now())
	switch {
	case err != nil:
		if j.ctx.Err() == nil {
			j.log.Error("jobs: finishing failed", "error", err)
		}
	case job.State == redrive.JobDone:
		j.log.Info("jobs: job finished", "done", job.Done, "skipped", job.Skipped, "failed", job.Failed)
	case job.State == redrive.JobRunning && job.Remaining() > 0:
		return false // items released meanwhile: go on
	}
	return true
}

// sendBatch loads, sends and settles a claimed batch. It reports false when the job should
// stop (the batch could not be loaded or settled).
func (j *jobRun) sendBatch(b *store.JobBatch) (ok bool) {
	span := j.r.tracer.start(j.job, b)
	defer span.end(&ok)
	// The claim is this instance's: finish even when the job's context ends.
	ctx, cancel := context.WithTimeout(span.context(context.WithoutCancel(j.base)), j.r.cfg.BatchTimeout)
	defer cancel()
	defer j.own(b.ClaimID, false)
	if j.r.dead.Load() {
		return false
	}
	records, err := j.load(ctx, b.Items)
	if err != nil {
		j.log.Error("jobs: loading a batch's records failed; its items stay pending", "error", err)
		if err := j.r.store.ReleaseJobClaim(ctx, j.job.ID, b.ClaimID); err != nil {
			j.log.Error("jobs: releasing a claim failed; the next holder settles it", "error", err)
		}
		return false
	}
	sends, sendable := j.prepare(b.Items, records)
	j.publish(ctx, sends, sendable)
	if j.r.abandon("after send", callHook(j.r.cfg.Hooks.AfterSend, ctx, b)) {
		return false
	}
	return j.settle(ctx, b, sends, sendable)
}

// load reads the records of items: by (id, created_at) when the preview pinned every item's
// created_at (store.ResendItemsAt, one probe of each primary key in one partition per
// failure), else by id (store.ResendItems).
func (j *jobRun) load(ctx context.Context, items []store.JobBatchItem) ([]store.ResendItem, error) {
	ids := make([]uuid.UUID, len(items))
	created := make([]time.Time, len(items)) // nil once a created_at is not known
	for i, it := range items {
		ids[i] = it.FailureID
		if created != nil && !it.CreatedAt.IsZero() {
			created[i] = it.CreatedAt
		} else {
			created = nil
		}
	}
	return j.r.store.ResendItemsAt(ctx, ids, created)
}

// prepare pairs each claimed item with its record, tagged and addressed for the job. An item
// without a record (its failure changed outside redrive while claimed) is skipped.
func (j *jobRun) prepare(items []store.JobBatchItem, records []store.ResendItem) ([]store.JobSend, []*store.ResendItem) {
	byID := make(map[uuid.UUID]*store.ResendItem, len(records))
	for i := range records {
		byID[records[i].ID] = &records[i]
	}
	sends := make([]store.JobSend, len(items))
	sendable := make([]*store.ResendItem, len(items))
	for i, it := range items {
		sends[i] = store.JobSend{Seq: it.Seq, FailureID: it.FailureID}
		rec, ok := byID[it.FailureID]
		if !ok {
			sends[i].Skipped = "state changed since the preview: the failure is no longer RETRY_PENDING or PERMANENT"
			continue
		}
		sends[i].CreatedAt = rec.CreatedAt
		if j.job.Action == actionResendTo && j.job.TargetTopic != nil && rec.Topic != *j.job.TargetTopic {
			rec.Topic, rec.Partition = *j.job.TargetTopic, redrive.UnknownPosition
		}
		if j.job.Action == actionResendTo && j.job.TargetCluster != nil && rec.Destination() != *j.job.TargetCluster {
			rec.TargetCluster, rec.Partition = *j.job.TargetCluster, store.UnknownPosition
		}
		rec.Headers = withTag(rec.Headers, tag(j.job.ID, it.Seq))
		sendable[i] = rec
	}
	return sends, sendable
}

// publish sends the records of sendable (nil ones are not sent) and fills in sends. A record
// not sent because the publisher shut down is marked with notAttempted.
func (j *jobRun) publish(ctx context.Context, sends []store.JobSend, sendable []*store.ResendItem) {
	var (
		batch []store.ResendItem
		index []int
	)
	for i, rec := range sendable {
		if rec != nil {
			batch, index = append(batch, *rec), append(index, i)
		}
	}
	if len(batch) == 0 {
		return
	}
	errs := j.r.cfg.Publisher.Publish(ctx, batch)
	now := j.r.cfg.Now()
	for k, err := range errs {
		i := index[k]
		switch {
		case err == nil:
			sends[i].Acked = true
		case errors.Is(err, redrive.ErrClosed):
			sends[i].Skipped = notAttempted
		default:
			sends[i].Error = err.Error()
			sends[i].NextAttemptAt = j.r.cfg.Publisher.RetryAt(sendable[i].ResendFailures, now)
		}
	}
}

// notAttempted marks a send that did not happen: its item stays pending.
const notAttempted = "\x00not attempted"

// settle records the batch's outcome (store.SettleJobClaim). It reports false when it could
// not: the claim stays, and the job's next holder settles it.
func (j *jobRun) settle(ctx context.Context, b *store.JobBatch, sends []store.JobSend, sendable []*store.ResendItem) bool {
	out := sends[:0:0]
	for _, s := range sends {
		if s.Skipped != notAttempted {
			out = append(out, s)
		}
	}
	// The acknowledged heads' followers first: they count in the job's total before the
	// heads' outcomes could make it DONE.
	causing := make(map[uuid.UUID]string, len(sendable))
	for _, rec := range sendable {
		if rec != nil {
			causing[rec.ID] = rec.CausingMessage
		}
	}
	j.followChains(ctx, out, causing)
	entry, item := j.audit()
	job, err := j.r.store.SettleJobClaim(ctx, store.SettleJobClaimParams{JobID: j.job.ID, JobCreatedAt: j.job.CreatedAt, ClaimID: b.ClaimID, Sends: out,
		At: j.r.cfg.Now(), Audit: entry, Item: item})
	switch {
	case errors.Is(err, redrive.ErrClaimSettled):
		j.log.Warn("jobs: a claim was settled by another instance meanwhile", "claim", b.ClaimID)
		return false
	case err != nil:
		j.log.Error("jobs: recording a batch's outcome failed; the job's next holder settles it", "claim", b.ClaimID, "error", err)
		return false
	}
	if j.r.abandon("after settle", callHook(j.r.cfg.Hooks.AfterSettle, ctx, b)) {
		return false
	}
	if job.State == redrive.JobDone {
		j.log.Info("jobs: job finished", "done", job.Done, "skipped", job.Skipped, "failed", job.Failed)
	}
	// Records the publisher did not send (it shut down) stay pending: stop claiming more.
	return len(out) == len(sends)
}

// audit returns the one "retry" audit entry of a batch, with the job's id, and what the entry
// of each item adds by its outcome: a done item's record was resent, a failed one's was not
// (the item's detail is its error).
func (j *jobRun) audit() (*store.AuditEntry, map[store.JobItemOutcome]map[string]any) {
	details := map[string]any{"job_id": j.job.ID.String(), "trigger": "manual",
		"resending_service": j.r.cfg.Publisher.ServiceName()}
	if j.job.TargetTopic != nil {
		details["target_topic"] = *j.job.TargetTopic
	}
	if j.job.TargetCluster != nil {
		details["target_cluster"] = *j.job.TargetCluster
	}
	return &store.AuditEntry{Action: resendtype.AuditActionRetry, Principal: j.job.Principal, Reason: j.job.Reason, Details: details},
		map[store.JobItemOutcome]map[string]any{
			store.JobItemDone:   {"outcome": string(resendtype.OutcomeResent)},
			store.JobItemFailed: {"outcome": string(resendtype.OutcomeFailed)},
		}
}

// recoverClaim settles a claim of the job that this run did not take (an instance died, or the
// job was paused or canceled, between its claim and its settle): it takes the claim over, asks
// the broker which of its records arrived, and counts those done. With send, it sends the
// others and settles them as any batch; without, they stay pending.
func (j *jobRun) recoverClaim(ctx context.Context, c store.JobClaim, send bool) {
	log := j.log.With("claim", c.ID, "from", c.Owner)
	took, err := j.r.store.TakeJobClaim(ctx, c.JobID, c.ID, c.Owner, j.r.cfg.Owner)
	if err != nil || !took {
		if err != nil && ctx.Err() == nil {
			log.Error("jobs: taking over a claim failed", "error", err)
		}
		return
	}
	j.own(c.ID, true)
	defer j.own(c.ID, false)
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), j.r.cfg.BatchTimeout)
	defer cancel()
	records, err := j.load(bctx, c.Items)
	if err != nil {
		log.Error("jobs: loading a recovered claim's records failed", "error", err)
		return
	}
	sends, sendable := j.prepare(c.Items, records)
	tagged := make([]resendtype.Tagged, 0, len(sendable))
	for i, rec := range sendable {
		if rec != nil {
			tagged = append(tagged, resendtype.Tagged{Cluster: rec.Destination(), Topic: rec.Topic, Partition: rec.Partition, Tag: tag(c.JobID, c.Items[i].Seq)})
		}
	}
	// The claim's records were produced after the claim (by the same instance's clock); a
	// minute of margin covers a broker that stamps records with its own clock.
	found, err := j.r.cfg.Publisher.Delivered(bctx, c.ClaimedAt.Add(-time.Minute), tagged)
	if err != nil {
		log.Error("jobs: cannot tell which records of a recovered claim arrived; trying again later", "error", err)
		return
	}
	rest := make([]*store.ResendItem, len(sendable))
	arrived := 0
	for i, rec := range sendable {
		switch {
		case rec == nil:
		case found[tag(c.JobID, c.Items[i].Seq)]:
			sends[i].Acked = true
			arrived++
		case send:
			rest[i] = rec
		default:
			sends[i].Skipped = notAttempted
		}
	}
	log.Info("jobs: settling a claim an earlier holder left", "items", len(c.Items), "arrived", arrived, "send_rest", send)
	j.publish(ctx, sends, rest)
	b := &store.JobBatch{ClaimID: c.ID, ClaimedAt: c.ClaimedAt, Items: c.Items}
	if j.r.abandon("after send", callHook(j.r.cfg.Hooks.AfterSend, bctx, b)) {
		return
	}
	j.settle(bctx, b, sends, sendable)
}

// tag is the resendtype.HeaderJobItem value of a job's item.
func tag(job uuid.UUID, seq int64) string { return fmt.Sprintf("%s/%d", job, seq) }

// withTag returns headers without earlier resendtype.HeaderJobItem headers, plus one with t.
func withTag(headers []avro.Header, t string) []avro.Header {
	out := make([]avro.Header, 0, len(headers)+1)
	for _, h := range headers {
		if h.Name != resendtype.HeaderJobItem {
			out = append(out, h)
		}
	}
	return append(out, avro.Header{Name: resendtype.HeaderJobItem, Value: []byte(t)})
}
