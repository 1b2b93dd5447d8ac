package operator_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

// runner runs c.RunJobs until the test ends or stop is called.
func runner(t *testing.T, c *operator.Core, cfg operator.JobRunnerConfig) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.RunJobs(ctx, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("RunJobs: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitJob polls the job until ok says yes, or fails the test after a minute.
func waitJob(t *testing.T, c *operator.Core, id uuid.UUID, what string, ok func(*operator.JobView) bool) *operator.JobView {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		j, err := c.Job(context.Background(), id, operator.Reader{})
		if err != nil {
			t.Fatal(err)
		}
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job never %s: %+v", what, j.Job)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func insertN(t *testing.T, pool *pgxpool.Pool, n int, r testkit.FailureRow) []uuid.UUID {
	t.Helper()
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = testkit.InsertFailure(t, pool, r)
	}
	return out
}

func states(t *testing.T, pool *pgxpool.Pool, ids []uuid.UUID) map[store.State]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT state, count(*) FROM failures WHERE id = ANY($1) GROUP BY state`, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[store.State]int{}
	for rows.Next() {
		var (
			s store.State
			n int
		)
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// closeAudits counts the close entries of each failure.
func closeAudits(t *testing.T, pool *pgxpool.Pool) map[uuid.UUID]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT failure_id, count(*) FROM audit_log WHERE action = 'close' GROUP BY failure_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]int{}
	for rows.Next() {
		var (
			id uuid.UUID
			n  int
		)
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

// The preview pins the selection: failures stored after it are untouched, and one that
// changed state in between is skipped with the reason.
func TestJobPinsItsSelection(t *testing.T) {
	t.Parallel()
	c, s := newCore(t, nil)
	pool := s.Pool()
	ctx := context.Background()
	pinned := insertN(t, pool, 5, testkit.FailureRow{Topic: "billing"})
	f := store.Filter{Topic: "billing"}
	p, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Selection: operator.Selection{Filter: &f},
		Principal: "alice", Reason: "billing outage"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Job.Total != 5 || p.Job.State != store.JobPreview || p.Token == "" {
		t.Fatalf("preview = %+v", p.Job)
	}
	later := insertN(t, pool, 3, testkit.FailureRow{Topic: "billing"})
	if _, err := s.CloseFailures(ctx, store.CloseRequest{IDs: pinned[:1], Principal: "bob", Reason: "by hand"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartJob(ctx, p.Job.ID, p.Token, operator.Reader{Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	runner(t, c, operator.JobRunnerConfig{Owner: "a", PollInterval: 10 * time.Millisecond})
	j := waitJob(t, c, p.Job.ID, "done", func(j *operator.JobView) bool { return j.State == store.JobDone })
	if j.Done != 4 || j.Skipped != 1 || j.Failed != 0 || j.Remaining() != 0 || j.FinishedAt == nil {
		t.Errorf("job = %+v", j.Job)
	}
	if got := states(t, pool, later); got[store.StatePermanent] != 3 {
		t.Errorf("failures stored after the preview: %v, want all PERMANENT", got)
	}
	items, err := c.JobItems(ctx, operator.JobItemsRequest{JobID: p.Job.ID, Outcome: "skipped"})
	if err != nil || len(items.Items) != 1 || items.Items[0].FailureID != pinned[0] || !strings.Contains(*items.Items[0].Detail, "state changed") {
		t.Errorf("skipped items = %+v, %v", items, err)
	}
	audit, err := c.JobAudit(ctx, p.Job.ID, operator.Reader{Payload: true})
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]int{}
	for _, e := range audit {
		actions[e.Action]++
	}
	if actions["job_preview"] != 1 || actions["job_start"] != 1 || actions["close"] != 4 {
		t.Errorf("job audit = %v", actions)
	}
}

// A forged, altered, foreign or expired token starts nothing.
func TestJobTokens(t *testing.T) {
	t.Parallel()
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	c, s := newCore(t, func(cfg *operator.Config) {
		cfg.Now = func() time.Time { return *now.Load() }
		cfg.PreviewTTL = time.Minute
	})
	pool := s.Pool()
	ids := insertN(t, pool, 2, testkit.FailureRow{})
	ctx := context.Background()
	preview := func() *operator.JobPreview {
		p, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Selection: operator.Selection{IDs: ids}, Principal: "alice", Reason: "r"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := preview(), preview()
	altered := []byte(a.Token)
	if altered[5] == 'A' {
		altered[5] = 'B'
	} else {
		altered[5] = 'A'
	}
	for name, tok := range map[string]string{
		"forged":  strings.Repeat("A", 43),
		"altered": string(altered),
		"foreign": b.Token,
		"garbage": "not a token",
		"empty":   "",
	} {
		_, err := c.StartJob(ctx, a.Job.ID, tok, operator.Reader{Principal: "mallory"})
		var ie *operator.InputError
		if !errors.As(err, &ie) || ie.Field != "token" {
			t.Errorf("%s token: %v, want an input error on token", name, err)
		}
	}
	later := start.Add(2 * time.Minute)
	now.Store(&later)
	if _, err := c.StartJob(ctx, a.Job.ID, a.Token, operator.Reader{Principal: "alice"}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token: %v", err)
	}
	if j, _ := c.Job(ctx, a.Job.ID, operator.Reader{}); j.State != store.JobPreview {
		t.Errorf("after refused tokens the job is %s", j.State)
	}
	if _, err := c.StartJob(ctx, uuid.New(), a.Token, operator.Reader{Principal: "alice"}); !errors.Is(err, operator.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if got := states(t, pool, ids); got[store.StatePermanent] != 2 {
		t.Errorf("refused tokens changed failures: %v", got)
	}
	// Bad requests create nothing.
	empty := store.Filter{}
	for name, req := range map[string]operator.JobRequest{
		"empty filter":  {Action: operator.Close, Reason: "r", Selection: operator.Selection{Filter: &empty}},
		"no reason":     {Action: operator.Close, Selection: operator.Selection{IDs: ids}},
		"no selection":  {Action: operator.Close, Reason: "r"},
		"bad rate":      {Action: operator.Close, Reason: "r", RateLimit: -1, Selection: operator.Selection{IDs: ids}},
		"bad action":    {Action: "delete", Selection: operator.Selection{IDs: ids}},
		"retry, no way": {Action: operator.Retry, Selection: operator.Selection{IDs: ids}},
	} {
		req.Principal = "alice"
		if _, err := c.PreviewJob(ctx, req); err == nil {
			t.Errorf("%s: preview made", name)
		}
	}
	page, err := c.ListJobs(ctx, 0, "", operator.Reader{Payload: true})
	if err != nil || len(page.Items) != 2 {
		t.Errorf("jobs = %d (%v), want the 2 previews", len(page.Items), err)
	}
}

// An instance that dies mid-job leaves it to another, which resumes after the last recorded
// batch; a batch whose action applied before the death is counted done, and no failure is
// acted on twice.
func TestJobResumesAfterAnInstanceDies(t *testing.T) {
	t.Parallel()
	c, s := newCore(t, nil)
	pool := s.Pool()
	ctx := context.Background()
	ids := insertN(t, pool, 240, testkit.FailureRow{Topic: "resume"})
	f := store.Filter{Topic: "resume"}
	p, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Selection: operator.Selection{Filter: &f},
		Principal: "alice", Reason: "cleanup", RateLimit: 400})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartJob(ctx, p.Job.ID, p.Token, operator.Reader{Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	// Instance A works for a while, then dies without releasing the job.
	now := time.Now()
	claimed, err := s.ClaimJob(ctx, "A", now, now.Add(time.Hour))
	if err != nil || claimed == nil || claimed.ID != p.Job.ID {
		t.Fatalf("claim = %+v, %v", claimed, err)
	}
	items, err := s.NextJobItems(ctx, p.Job.ID, 0, 60)
	if err != nil {
		t.Fatal(err)
	}
	// A closed the first 60 and recorded 40 of them, then died: 20 closed, not recorded.
	first := make([]uuid.UUID, 60)
	for i, it := range items {
		first[i] = it.FailureID
	}
	if _, err := s.CloseFailures(ctx, store.CloseRequest{IDs: first, Principal: "alice", Reason: "cleanup",
		Details: map[string]any{"job_id": p.Job.ID.String()}}); err != nil {
		t.Fatal(err)
	}
	var rec []store.JobItemResult
	for _, it := range items[:40] {
		rec = append(rec, store.JobItemResult{Seq: it.Seq, Outcome: store.JobItemDone})
	}
	if _, err := s.RecordJobItems(ctx, p.Job.ID, "A", rec, now, now.Add(50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	// Instance B claims it once A's lease ran out, and finishes.
	runner(t, c, operator.JobRunnerConfig{Owner: "B", PollInterval: 10 * time.Millisecond, BatchSize: 25})
	j := waitJob(t, c, p.Job.ID, "done", func(j *operator.JobView) bool { return j.State == store.JobDone })
	if j.Done != 240 || j.Skipped != 0 || j.Failed != 0 {
		t.Errorf("job after resume = %+v, want 240 done", j.Job)
	}
	audits := closeAudits(t, pool)
	for _, id := range ids {
		if audits[id] != 1 {
			t.Errorf("failure %s has %d close entries, want exactly 1", id, audits[id])
		}
	}
}

// Pause stops a running job where it is, resume goes on, cancel ends it with the rest
// untouched.
func TestJobPauseResumeCancel(t *testing.T) {
	t.Parallel()
	c, s := newCore(t, nil)
	pool := s.Pool()
	ctx := context.Background()
	insertN(t, pool, 60, testkit.FailureRow{Topic: "slow"})
	f := store.Filter{Topic: "slow"}
	p, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Selection: operator.Selection{Filter: &f},
		Principal: "alice", Reason: "r", RateLimit: 40})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartJob(ctx, p.Job.ID, p.Token, operator.Reader{Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartJob(ctx, p.Job.ID, p.Token, operator.Reader{Principal: "alice"}); err == nil {
		t.Error("a started job started again")
	}
	runner(t, c, operator.JobRunnerConfig{Owner: "a", PollInterval: 10 * time.Millisecond, BatchSize: 5})
	waitJob(t, c, p.Job.ID, "under way", func(j *operator.JobView) bool { return j.Done >= 5 })
	if _, err := c.ChangeJob(ctx, p.Job.ID, "pause", operator.Reader{Principal: "bob"}); err != nil {
		t.Fatal(err)
	}
	paused, _ := c.Job(ctx, p.Job.ID, operator.Reader{})
	// At most the batch in flight lands after the pause; then nothing moves.
	time.Sleep(300 * time.Millisecond)
	settled, _ := c.Job(ctx, p.Job.ID, operator.Reader{})
	if settled.State != store.JobPaused || settled.Done > paused.Done+5 || settled.Done == 60 {
		t.Errorf("paused job: %+v (at pause %d done)", settled.Job, paused.Done)
	}
	if _, err := c.ChangeJob(ctx, p.Job.ID, "pause", operator.Reader{Principal: "bob"}); err == nil {
		t.Error("a paused job paused again")
	}
	if _, err := c.ChangeJob(ctx, p.Job.ID, "resume", operator.Reader{Principal: "bob"}); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, c, p.Job.ID, "done", func(j *operator.JobView) bool { return j.State == store.JobDone })
	if j.Done != 60 || j.Rate <= 0 || j.ETA != nil {
		t.Errorf("resumed job: %+v rate %v", j.Job, j.Rate)
	}

	insertN(t, pool, 50, testkit.FailureRow{Topic: "cancel"})
	f2 := store.Filter{Topic: "cancel"}
	p2, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Selection: operator.Selection{Filter: &f2},
		Principal: "alice", Reason: "r", RateLimit: 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartJob(ctx, p2.Job.ID, p2.Token, operator.Reader{Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, p2.Job.ID, "under way", func(j *operator.JobView) bool { return j.Done >= 1 })
	if _, err := c.ChangeJob(ctx, p2.Job.ID, "cancel", operator.Reader{Principal: "bob"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	j2, _ := c.Job(ctx, p2.Job.ID, operator.Reader{})
	pending, err := c.JobItems(ctx, operator.JobItemsRequest{JobID: p2.Job.ID, Outcome: "pending", Limit: 500})
	if err != nil || j2.State != store.JobCanceled || j2.Remaining() == 0 || int64(len(pending.Items)) != j2.Remaining() {
		t.Errorf("canceled job: %+v, %d pending (%v)", j2.Job, len(pending.Items), err)
	}
	if _, err := c.ChangeJob(ctx, p2.Job.ID, "resume", operator.Reader{Principal: "bob"}); err == nil {
		t.Error("a canceled job resumed")
	}
}

// Two instances running jobs at once act on every failure exactly once.
func TestJobsOnTwoInstances(t *testing.T) {
	t.Parallel()
	c, s := newCore(t, nil)
	c2, err := operator.New(operator.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	pool := s.Pool()
	ctx := context.Background()
	var all []uuid.UUID
	var jobs []uuid.UUID
	for _, topic := range []string{"t1", "t2", "t3"} {
		all = append(all, insertN(t, pool, 80, testkit.FailureRow{Topic: topic})...)
		f := store.Filter{Topic: topic}
		p, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Selection: operator.Selection{Filter: &f},
			Principal: "alice", Reason: "r", RateLimit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartJob(ctx, p.Job.ID, p.Token, operator.Reader{Principal: "alice"}); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, p.Job.ID)
	}
	runner(t, c, operator.JobRunnerConfig{Owner: "one", PollInterval: 5 * time.Millisecond, BatchSize: 10})
	runner(t, c2, operator.JobRunnerConfig{Owner: "two", PollInterval: 5 * time.Millisecond, BatchSize: 10})
	for _, id := range jobs {
		j := waitJob(t, c, id, "done", func(j *operator.JobView) bool { return j.State == store.JobDone })
		if j.Done != 80 || j.Skipped != 0 {
			t.Errorf("job %s = %+v", id, j.Job)
		}
	}
	audits := closeAudits(t, pool)
	for _, id := range all {
		if audits[id] != 1 {
			t.Errorf("failure %s has %d close entries, want 1", id, audits[id])
		}
	}
}

// A retry job resends through the resender: each pinned failure once, its outcome recorded.
func TestRetryJob(t *testing.T) {
	t.Parallel()
	cluster := testkit.Kafka(t)
	cluster.CreateTopic(t, "orders", 1)
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := resend.New(resend.Config{
		Store: s, Brokers: cluster.Bootstrap(), ServiceName: "redrive-jobs-test",
		DisableAutomatic: true, Housekeeping: resend.HousekeepingConfig{Disable: true}, SendTimeout: 5 * time.Second,
		Producer: kafka.ConfigMap{"log_level": 3}, Registerer: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(sctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c, err := operator.New(operator.Config{Store: s, Resender: sched.Resender(), RepairTopics: []string{"orders.replay"}})
	if err != nil {
		t.Fatal(err)
	}
	ids := insertN(t, pool, 30, testkit.FailureRow{Topic: "orders"})
	ctx := context.Background()
	p, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: ids}, Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartJob(ctx, p.Job.ID, p.Token, operator.Reader{Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	runner(t, c, operator.JobRunnerConfig{Owner: "a", PollInterval: 10 * time.Millisecond})
	j := waitJob(t, c, p.Job.ID, "done", func(j *operator.JobView) bool { return j.State == store.JobDone })
	if j.Done != 30 {
		t.Errorf("retry job = %+v", j.Job)
	}
	if got := states(t, pool, ids); got[store.StateResent] != 30 {
		t.Errorf("states = %v", got)
	}
	cluster.ConsumeN(t, "orders", 30, 30*time.Second)

	// A resend_to job sends the originals to another topic, allowed by the list.
	cluster.CreateTopic(t, "orders.replay", 1)
	more := insertN(t, pool, 5, testkit.FailureRow{Topic: "orders"})
	if _, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.ResendTo, TargetTopic: "elsewhere",
		Selection: operator.Selection{IDs: more}, Principal: "alice"}); err == nil {
		t.Error("a topic outside the allow-list was accepted")
	}
	p2, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.ResendTo, TargetTopic: "orders.replay",
		Selection: operator.Selection{IDs: more}, Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartJob(ctx, p2.Job.ID, p2.Token, operator.Reader{Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	j2 := waitJob(t, c, p2.Job.ID, "done", func(j *operator.JobView) bool { return j.State == store.JobDone })
	if j2.Done != 5 || j2.TargetTopic == nil || *j2.TargetTopic != "orders.replay" {
		t.Errorf("resend_to job = %+v", j2.Job)
	}
	cluster.ConsumeN(t, "orders.replay", 5, 30*time.Second)
}
