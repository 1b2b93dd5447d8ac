package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/store"
)

// The preview pins the selection: failures stored after it are untouched, and one that
// changed state in between is skipped with the reason.
func TestCloseJobPinsItsSelection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	pinned := e.insertN(5, testkit.FailureRow{Topic: "billing"})
	f := redrive.Filter{Topic: "billing"}
	p, err := e.core.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Selection: operator.Selection{Filter: &f},
		Principal: "alice", Reason: "billing outage"})
	if err != nil {
		t.Fatal(err)
	}
	later := e.insertN(3, testkit.FailureRow{Topic: "billing"})
	if _, err := e.store.CloseFailures(ctx, store.CloseRequest{IDs: pinned[:1], Principal: "bob", Reason: "by hand"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.core.StartJob(ctx, p.Job.ID, p.Token, operator.Reader{Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	e.run(jobs.Config{})
	j := e.waitJob(p.Job.ID, time.Minute, "done", done)
	if j.Done != 4 || j.Skipped != 1 || j.Failed != 0 || j.Remaining() != 0 || j.FinishedAt == nil {
		t.Errorf("job = %+v", j.Job)
	}
	if got := e.states(later); got[redrive.StatePermanent] != 3 {
		t.Errorf("failures stored after the preview: %v, want all PERMANENT", got)
	}
	skipped := e.items(p.Job.ID, "skipped")
	if len(skipped) != 1 || skipped[0].FailureID != pinned[0] || !strings.Contains(*skipped[0].Detail, "state changed") {
		t.Errorf("skipped items = %+v", skipped)
	}
	audit, err := e.core.JobAudit(ctx, p.Job.ID, operator.Reader{})
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]int{}
	for _, a := range audit {
		actions[a.Action]++
	}
	if actions["job_preview"] != 1 || actions["job_start"] != 1 || actions["close"] != 4 {
		t.Errorf("job audit = %v", actions)
	}
}

// A retry job resends each pinned failure once, a resend_to job to its target topic, and a
// record the broker refuses is failed with the error.
func TestRetryJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders", "orders.replay", "refusing")
	pub := e.instance().Resender()
	ids := e.insertN(30, testkit.FailureRow{Topic: "orders"})
	id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}})
	e.run(jobs.Config{Publisher: pub, BatchSize: 7})
	e.waitJob(id, time.Minute, "done", done)
	e.exactlyOnce(id, "orders", ids)

	more := e.insertN(5, testkit.FailureRow{Topic: "orders"})
	id2 := e.start(operator.JobRequest{Action: operator.ResendTo, TargetTopic: "orders.replay", Selection: operator.Selection{IDs: more}})
	j := e.waitJob(id2, time.Minute, "done", done)
	if j.Done != 5 || j.TargetTopic == nil || *j.TargetTopic != "orders.replay" {
		t.Errorf("resend_to job = %+v", j.Job)
	}
	if byTag, n := e.sent("orders.replay"); n != 5 || len(byTag) != 5 {
		t.Errorf("orders.replay has %d records, %d tags", n, len(byTag))
	}

	e.cluster.FailProduce("refusing", 0)
	refused := e.insertN(3, testkit.FailureRow{Topic: "refusing"})
	id3 := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: refused}})
	j3 := e.waitJob(id3, time.Minute, "done", done)
	if j3.Failed != 3 || j3.Done != 0 {
		t.Errorf("refused job = %+v", j3.Job)
	}
	for _, it := range e.items(id3, "failed") {
		if it.Detail == nil || *it.Detail == "" {
			t.Errorf("failed item %d has no error", it.Seq)
		}
	}
	if got := e.states(refused); got[redrive.StatePermanent] != 3 {
		t.Errorf("refused failures: %v, want PERMANENT", got)
	}
}

// A burst of ten full batches at once, and one item more, is acted on exactly once, item by
// item, with one audit entry per batch; a job of one item started right after it is too.
func TestBurstOfTenBatchesAndOneMore(t *testing.T) {
	t.Parallel()
	const batch = 50
	e := newEnv(t, "orders")
	pub := e.instance().Resender()
	ids := e.insertN(10*batch+1, testkit.FailureRow{Topic: "orders"})
	id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}})
	e.run(jobs.Config{Publisher: pub, BatchSize: batch})
	e.waitJob(id, 2*time.Minute, "done", done)
	e.exactlyOnce(id, "orders", ids)
	var entries, items int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*), coalesce(sum((details->'batch'->>'items')::int), 0)
		FROM audit_log WHERE job_id = $1 AND action = 'retry'`, id).Scan(&entries, &items); err != nil {
		t.Fatal(err)
	}
	if entries < 11 || entries > len(ids) || items != len(ids) {
		t.Errorf("%d batch entries for %d items, want at least 11 entries for %d items", entries, items, len(ids))
	}

	one := e.insertN(1, testkit.FailureRow{Topic: "orders"})
	id2 := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: one}})
	e.waitJob(id2, time.Minute, "done", done)
	if j := e.job(id2); j.Done != 1 || j.Skipped != 0 || j.Failed != 0 {
		t.Errorf("the job after the burst = %+v", j.Job)
	}
	if got := e.states(one); got[store.StateResent] != 1 {
		t.Errorf("the one more failure: %v, want RESENT", got)
	}
	if byTag, n := e.sent("orders"); n != len(ids)+1 || len(byTag) != len(ids)+1 {
		t.Errorf("orders has %d records for %d tags, want %d of each", n, len(byTag), len(ids)+1)
	}
}

// errKilled is what a hook returns to make its runner die where it is.
var errKilled = errors.New("killed")

// killAt returns hooks that kill their runner at step of the nth batch (1-based) and a channel
// closed when they did.
func killAt(step string, nth int64) (jobs.Hooks, <-chan struct{}) {
	var n atomic.Int64
	dead := make(chan struct{})
	var closed atomic.Bool
	hook := func(context.Context, *store.JobBatch) error {
		if n.Add(1) < nth {
			return nil
		}
		if !closed.Swap(true) {
			close(dead)
		}
		return errKilled
	}
	var h jobs.Hooks
	switch step {
	case "claim":
		h.AfterClaim = hook
	case "send":
		h.AfterSend = hook
	case "settle":
		h.AfterSettle = hook
	}
	return h, dead
}

// An instance killed between any two steps of a batch (claim → send → settle, where settle
// marks and records in one transaction) leaves the job to another instance on the same
// database, which resumes it: every item ends done, and every record reaches the topic
// exactly once, whatever step each of three instances died at.
func TestJobSurvivesKills(t *testing.T) {
	t.Parallel()
	for _, steps := range [][]string{{"claim"}, {"send"}, {"settle"}, {"send", "claim", "send"}} {
		t.Run(strings.Join(steps, "-"), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "orders")
			ids := e.insertN(120, testkit.FailureRow{Topic: "orders"})
			id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}, RateLimit: 2000})
			cfg := jobs.Config{BatchSize: 10, Concurrency: 2, Lease: 600 * time.Millisecond, Heartbeat: 100 * time.Millisecond,
				ClaimGrace: 600 * time.Millisecond}
			for i, step := range steps {
				hooks, dead := killAt(step, int64(2+i))
				c := cfg
				c.Hooks, c.Publisher = hooks, e.instance().Resender()
				r := e.run(c)
				select {
				case <-dead:
				case <-time.After(time.Minute):
					t.Fatalf("instance %d never reached the %s step to die at", i, step)
				}
				r.stop() // the instance is gone; what it left stays as it was
			}
			c := cfg
			c.Publisher = e.instance().Resender()
			e.run(c)
			e.waitJob(id, time.Minute, "done", done)
			e.exactlyOnce(id, "orders", ids)
		})
	}
}

// A claim left by an instance that died, of a job canceled since, is settled by another
// instance: the records that arrived count done, the others stay pending, and the job stays
// CANCELED.
func TestStrandedClaimOfACanceledJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders")
	ids := e.insertN(40, testkit.FailureRow{Topic: "orders"})
	id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}, RateLimit: 2000})
	cfg := jobs.Config{BatchSize: 10, Concurrency: 1, Lease: 600 * time.Millisecond, Heartbeat: 100 * time.Millisecond,
		ClaimGrace: 600 * time.Millisecond}
	hooks, dead := killAt("send", 2)
	c := cfg
	c.Hooks, c.Publisher = hooks, e.instance().Resender()
	r := e.run(c)
	<-dead
	r.stop()
	if _, err := e.core.ChangeJob(context.Background(), id, "cancel", operator.Reader{Principal: "bob"}); err != nil {
		t.Fatal(err)
	}
	c = cfg
	c.Publisher = e.instance().Resender()
	e.run(c)
	j := e.waitJob(id, time.Minute, "settled", func(j *operator.JobView) bool { return j.Done == 20 })
	if j.State != redrive.JobCanceled || j.Failed != 0 || j.Skipped != 0 || j.Remaining() != 20 {
		t.Errorf("canceled job = %+v", j.Job)
	}
	if n := len(e.items(id, "pending")); n != 20 {
		t.Errorf("%d pending items, want 20", n)
	}
	if got := e.states(ids); got[redrive.StateResent] != 20 || got[redrive.StatePermanent] != 20 {
		t.Errorf("states = %v", got)
	}
	byTag, total := e.sent("orders")
	if total != 20 || len(byTag) != 20 {
		t.Errorf("%d records, %d tags, want 20 of each", total, len(byTag))
	}
}

// A stop (SIGTERM) while a batch waits on the job's rate limit records nothing for the items
// not attempted: none is failed, the job stays RUNNING, and the next instance finishes it,
// each record sent once.
func TestStopWhileWaitingOnTheRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders")
	ids := e.insertN(12, testkit.FailureRow{Topic: "orders"})
	id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}, RateLimit: 4})
	r := e.run(jobs.Config{Publisher: e.instance().Resender()})
	e.waitJob(id, time.Minute, "under way", func(j *operator.JobView) bool { return j.Done >= 4 })
	r.stop() // the first batch (a second's worth) is done; the second waits on the limiter
	j := e.job(id)
	pending := e.items(id, "pending")
	if j.State != redrive.JobRunning || j.Failed != 0 || j.Skipped != 0 || j.Done == 12 || int64(len(pending)) != j.Remaining() {
		t.Errorf("stopped job = %+v, %d pending", j.Job, len(pending))
	}
	e.run(jobs.Config{Publisher: e.instance().Resender()})
	e.waitJob(id, time.Minute, "done", done)
	e.exactlyOnce(id, "orders", ids)
}

// When the instance's producer shuts down before its jobs runner (the service stopping), the
// records it did not send stay pending, never failed, and the next instance sends them once.
func TestPublisherClosedMidJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders")
	ids := e.insertN(12, testkit.FailureRow{Topic: "orders"})
	id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}, RateLimit: 4})
	sched, stopSched := e.instanceWithStop()
	var closed, triedClosed atomic.Bool
	r := e.run(jobs.Config{Publisher: sched.Resender(), Hooks: jobs.Hooks{AfterSend: func(context.Context, *store.JobBatch) error {
		if closed.Load() {
			triedClosed.Store(true)
		}
		return nil
	}}})
	e.waitJob(id, time.Minute, "under way", func(j *operator.JobView) bool { return j.Done >= 4 })
	stopSched()
	closed.Store(true)
	// The runner goes on at the job's rate: its next batch finds the producer closed.
	e.waitJob(id, time.Minute, "tried with the producer closed", func(*operator.JobView) bool { return triedClosed.Load() })
	r.stop()
	j := e.job(id)
	if j.State != redrive.JobRunning || j.Failed != 0 || j.Skipped != 0 || j.Done == 12 || int64(len(e.items(id, "pending"))) != j.Remaining() {
		t.Errorf("job after the producer closed = %+v", j.Job)
	}
	e.run(jobs.Config{Publisher: e.instance().Resender()})
	e.waitJob(id, time.Minute, "done", done)
	e.exactlyOnce(id, "orders", ids)
}

// Cancel and pause take effect within a second even while the job waits on a rate limit of
// one item per 100 s: the instance's only job slot is free again for another job.
func TestCancelAndPauseUnderALowRate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders")
	e.run(jobs.Config{Publisher: e.instance().Resender(), MaxJobs: 1})
	for _, op := range []string{"cancel", "pause"} {
		slow := e.insertN(3, testkit.FailureRow{Topic: "orders"})
		id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: slow}, RateLimit: operator.MinJobRate})
		e.waitJob(id, time.Minute, "under way", func(j *operator.JobView) bool { return j.Done == 1 })
		// The job now waits 100 s for its next item.
		if _, err := e.core.ChangeJob(context.Background(), id, op, operator.Reader{Principal: "bob"}); err != nil {
			t.Fatal(err)
		}
		next := e.insertN(2, testkit.FailureRow{Topic: "orders"})
		other := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: next}, RateLimit: 100})
		e.waitJob(other, time.Second, "claimed (the slot stayed taken after "+op+")", func(j *operator.JobView) bool {
			return j.Owner != nil || j.Done > 0
		})
		e.waitJob(other, time.Minute, "done", done)
		if j := e.job(id); j.Done != 1 || j.Failed != 0 || j.Remaining() != 2 {
			t.Errorf("after %s: %+v", op, j.Job)
		}
	}
}

// Slow jobs do not delay another on the same instance: a job waiting on its rate limit holds
// no batch slot, so more slow jobs than batch slots still leave room for a fast one.
func TestSlowJobsDoNotDelayAnother(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders")
	var slow []uuid.UUID
	for range 3 {
		ids := e.insertN(3, testkit.FailureRow{Topic: "orders"})
		slow = append(slow, e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}, RateLimit: operator.MinJobRate}))
	}
	e.run(jobs.Config{Publisher: e.instance().Resender(), MaxBatches: 2})
	for _, id := range slow {
		e.waitJob(id, time.Minute, "under way", func(j *operator.JobView) bool { return j.Done == 1 })
	}
	fast := e.insertN(50, testkit.FailureRow{Topic: "orders"})
	fastID := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: fast}, RateLimit: 1000})
	e.waitJob(fastID, 30*time.Second, "done", done)
	for _, id := range slow {
		if j := e.job(id); j.State != redrive.JobRunning || j.Done != 1 {
			t.Errorf("slow job = %+v", j.Job)
		}
	}
}

// Two instances running jobs at once act on every selected failure exactly once, with exact
// per-item accounting.
func TestJobsOnTwoInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "t1", "t2", "t3")
	cfg := func() jobs.Config {
		return jobs.Config{Publisher: e.instance().Resender(), BatchSize: 10, MaxJobs: 2, PollInterval: 5 * time.Millisecond}
	}
	e.run(cfg())
	e.run(cfg())
	type job struct {
		id    uuid.UUID
		topic string
		ids   []uuid.UUID
	}
	var all []job
	for _, topic := range []string{"t1", "t2", "t3"} {
		ids := e.insertN(80, testkit.FailureRow{Topic: topic})
		all = append(all, job{id: e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}, RateLimit: 5000}),
			topic: topic, ids: ids})
	}
	closing := e.insertN(60, testkit.FailureRow{Topic: "c"})
	closeID := e.start(operator.JobRequest{Action: operator.Close, Reason: "r", Selection: operator.Selection{IDs: closing}, RateLimit: 5000})
	for _, j := range all {
		e.waitJob(j.id, time.Minute, "done", done)
		e.exactlyOnce(j.id, j.topic, j.ids)
	}
	c := e.waitJob(closeID, time.Minute, "done", done)
	if c.Done != 60 || c.Skipped != 0 || c.Failed != 0 {
		t.Errorf("close job = %+v", c.Job)
	}
	audits := e.audits("close")
	for _, id := range closing {
		if audits[id] != 1 {
			t.Errorf("failure %s has %d close entries, want 1", id, audits[id])
		}
	}
}

// Pause stops a running job where it is (at most the batch in flight lands after it), resume
// goes on to DONE, and cancel ends a job with the rest pending. The instance's only job slot
// running another job to its end shows that the paused or canceled job stopped.
func TestJobPauseResumeCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.run(jobs.Config{BatchSize: 5, MaxJobs: 1})
	// stopped waits until the instance's slot ran another job: the job before it has stopped.
	stopped := func() {
		t.Helper()
		blocker := e.start(operator.JobRequest{Action: operator.Close, Reason: "r",
			Selection: operator.Selection{IDs: e.insertN(1, testkit.FailureRow{Topic: "other"})}})
		e.waitJob(blocker, time.Minute, "done", done)
	}
	e.insertN(60, testkit.FailureRow{Topic: "slow"})
	f := redrive.Filter{Topic: "slow"}
	id := e.start(operator.JobRequest{Action: operator.Close, Selection: operator.Selection{Filter: &f}, Reason: "r", RateLimit: 40})
	e.waitJob(id, time.Minute, "under way", func(j *operator.JobView) bool { return j.Done >= 5 })
	if _, err := e.core.ChangeJob(ctx, id, "pause", operator.Reader{Principal: "bob"}); err != nil {
		t.Fatal(err)
	}
	paused := e.job(id)
	stopped()
	if j := e.job(id); j.State != redrive.JobPaused || j.Done > paused.Done+5 || j.Done == 60 {
		t.Errorf("paused job: %+v (at the pause %d done)", j.Job, paused.Done)
	}
	if _, err := e.core.ChangeJob(ctx, id, "pause", operator.Reader{Principal: "bob"}); err == nil {
		t.Error("a paused job paused again")
	}
	if _, err := e.core.ChangeJob(ctx, id, "resume", operator.Reader{Principal: "bob"}); err != nil {
		t.Fatal(err)
	}
	j := e.waitJob(id, time.Minute, "done", done)
	if j.Done != 60 || j.Rate <= 0 || j.ETA != nil {
		t.Errorf("resumed job: %+v rate %v", j.Job, j.Rate)
	}

	e.insertN(50, testkit.FailureRow{Topic: "cancel"})
	f2 := redrive.Filter{Topic: "cancel"}
	id2 := e.start(operator.JobRequest{Action: operator.Close, Selection: operator.Selection{Filter: &f2}, Reason: "r", RateLimit: 20})
	e.waitJob(id2, time.Minute, "under way", func(j *operator.JobView) bool { return j.Done >= 1 })
	if _, err := e.core.ChangeJob(ctx, id2, "cancel", operator.Reader{Principal: "bob"}); err != nil {
		t.Fatal(err)
	}
	stopped()
	j2 := e.job(id2)
	pending := e.items(id2, "pending")
	if j2.State != redrive.JobCanceled || j2.Remaining() == 0 || int64(len(pending)) != j2.Remaining() || j2.Failed != 0 {
		t.Errorf("canceled job: %+v, %d pending", j2.Job, len(pending))
	}
	if _, err := e.core.ChangeJob(ctx, id2, "resume", operator.Reader{Principal: "bob"}); err == nil {
		t.Error("a canceled job resumed")
	}
}

// A resumed job finds a dead instance's records on every partition of the topic they went to,
// also for a resend_to job.
func TestRecoveryReadsEveryPartition(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders")
	e.cluster.CreateTopic(t, "wide", 3)
	e.cluster.CreateTopic(t, "wide.replay", 3)
	// Some records on the topics already, before the claims.
	for i := range 5 {
		e.cluster.Produce(t, testkit.Message("wide", []byte{byte(i)}, []byte("earlier")), testkit.Message("wide.replay", []byte{byte(i)}, []byte("earlier")))
	}
	core, err := operator.New(operator.Config{Store: e.store, Resender: e.instance().Resender(), RepairTopics: []string{"wide.replay"}})
	if err != nil {
		t.Fatal(err)
	}
	e.core = core
	for _, req := range []operator.JobRequest{
		{Action: operator.Retry},
		{Action: operator.ResendTo, TargetTopic: "wide.replay"},
	} {
		ids := make([]uuid.UUID, 60)
		for i := range ids {
			ids[i] = testkit.InsertFailure(t, e.pool, testkit.FailureRow{Topic: "wide", Key: []byte(uuid.NewString())})
		}
		req.Selection, req.RateLimit = operator.Selection{IDs: ids}, 2000
		id := e.start(req)
		cfg := jobs.Config{BatchSize: 10, Concurrency: 3, Lease: 600 * time.Millisecond, Heartbeat: 100 * time.Millisecond,
			ClaimGrace: 600 * time.Millisecond}
		hooks, dead := killAt("send", 2)
		c := cfg
		c.Hooks, c.Publisher = hooks, e.instance().Resender()
		r := e.run(c)
		<-dead
		r.stop()
		c = cfg
		c.Publisher = e.instance().Resender()
		stop := e.run(c).stop
		e.waitJob(id, time.Minute, "done", done)
		stop()
		topic := "wide"
		if req.TargetTopic != "" {
			topic = req.TargetTopic
		}
		byTag, _ := e.sent(topic)
		j := e.job(id)
		if j.Done != 60 || j.Skipped != 0 || j.Failed != 0 {
			t.Errorf("%s job = %+v", req.Action, j.Job)
		}
		n := 0
		for tag, count := range byTag {
			if strings.HasPrefix(tag, id.String()+"/") {
				n++
				if count != 1 {
					t.Errorf("%s: record %s sent %d times", req.Action, tag, count)
				}
			}
		}
		if n != 60 {
			t.Errorf("%s: %d of the job's records on %s, want 60", req.Action, n, topic)
		}
	}
}
