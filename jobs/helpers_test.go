package jobs_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// env is a database, an in-process Kafka and an operator core that previews and starts jobs.
type env struct {
	t       *testing.T
	pool    *pgxpool.Pool
	store   *store.Store
	core    *operator.Core
	cluster *testkit.Cluster
}

func quiet() *slog.Logger {
	if testing.Verbose() && os.Getenv("JOBS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newEnv returns an env whose Kafka has the given topics, one partition each.
func newEnv(t *testing.T, topics ...string) *env {
	t.Helper()
	e := &env{t: t, pool: testkit.Postgres(t)}
	var err error
	if e.store, err = store.New(store.Config{Pool: e.pool}); err != nil {
		t.Fatal(err)
	}
	var res operator.Resender
	if len(topics) > 0 {
		e.cluster = testkit.Kafka(t)
		for _, topic := range topics {
			e.cluster.CreateTopic(t, topic, 1)
		}
		res = e.instance().Resender()
	}
	if e.core, err = operator.New(operator.Config{Store: e.store, Resender: res, RepairTopics: topics}); err != nil {
		t.Fatal(err)
	}
	return e
}

// instance runs a resend scheduler (no automatic rounds), an instance's producer, until stop
// or the end of the test.
func (e *env) instance() *resend.Scheduler {
	sched, _ := e.instanceWithStop()
	return sched
}

// instanceWithStop is instance with a function that stops the scheduler (its Resender then
// sends nothing more).
func (e *env) instanceWithStop() (*resend.Scheduler, func()) {
	return e.instanceWith(nil)
}

// instanceWith is instanceWithStop with the scheduler's configuration changed by edit.
func (e *env) instanceWith(edit func(*resend.Config)) (*resend.Scheduler, func()) {
	t := e.t
	cfg := resend.Config{
		Store: e.store, Brokers: e.cluster.Bootstrap(), ServiceName: "redrive-jobs-test",
		DisableAutomatic: true, Housekeeping: resend.HousekeepingConfig{Disable: true}, SendTimeout: 5 * time.Second,
		Producer: kafka.ConfigMap{"log_level": 3}, Registerer: prometheus.NewRegistry(), Logger: quiet(),
	}
	if edit != nil {
		edit(&cfg)
	}
	sched, err := resend.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return sched, stop
}

// runner is a running jobs.Runner.
type runner struct {
	stop func()
}

// run starts a runner for cfg (Store, Logger and short intervals filled in) until stop or the
// end of the test. A retry job needs cfg.Publisher.
func (e *env) run(cfg jobs.Config) *runner {
	t := e.t
	t.Helper()
	cfg.Store = e.store
	if cfg.Owner == "" {
		cfg.Owner = "runner-" + uuid.NewString()[:8]
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	r, err := jobs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &runner{stop: stop}
}

// start previews and starts a job.
func (e *env) start(req operator.JobRequest) uuid.UUID {
	e.t.Helper()
	if req.Principal == "" {
		req.Principal = "alice"
	}
	ctx := context.Background()
	p, err := e.core.PreviewJob(ctx, req)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.core.StartJob(ctx, p.Job.ID, p.Token, operator.Reader{Principal: req.Principal}); err != nil {
		e.t.Fatal(err)
	}
	return p.Job.ID
}

// job returns the job with id.
func (e *env) job(id uuid.UUID) *operator.JobView {
	e.t.Helper()
	j, err := e.core.Job(context.Background(), id, operator.Reader{})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// waitJob polls the job until ok says yes, or fails the test after within.
func (e *env) waitJob(id uuid.UUID, within time.Duration, what string, ok func(*operator.JobView) bool) *operator.JobView {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		j := e.job(id)
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job not %s within %s: %+v", what, within, j.Job)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

func done(j *operator.JobView) bool { return j.State == redrive.JobDone }

func (e *env) insertN(n int, r testkit.FailureRow) []uuid.UUID {
	e.t.Helper()
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = testkit.InsertFailure(e.t, e.pool, r)
	}
	return out
}

// states counts the failures among ids by state.
func (e *env) states(ids []uuid.UUID) map[redrive.State]int {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT state, count(*) FROM failures WHERE id = ANY($1) GROUP BY state`, ids)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[redrive.State]int{}
	for rows.Next() {
		var (
			s redrive.State
			n int
		)
		if err := rows.Scan(&s, &n); err != nil {
			e.t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// audits counts the audit entries of action of each failure: its own, and those of the job
// batches whose entry its job item names.
func (e *env) audits(action string) map[uuid.UUID]int {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `
		SELECT fid, count(*) FROM (
			SELECT failure_id AS fid FROM audit_log WHERE action = $1 AND failure_id IS NOT NULL
			UNION ALL
			SELECT i.failure_id FROM job_items i JOIN audit_log a ON a.id = i.audit_id AND a.at = i.done_at AND a.job_id = i.job_id
			WHERE a.action = $1) e
		GROUP BY fid`, action)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]int{}
	for rows.Next() {
		var (
			id uuid.UUID
			n  int
		)
		if err := rows.Scan(&id, &n); err != nil {
			e.t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

// sent reads every record on topic and counts them by their job item tag (a record without
// one counts under "").
func (e *env) sent(topic string) (map[string]int, int) {
	e.t.Helper()
	total := 0
	for _, hw := range e.cluster.EndOffsets(topic) {
		total += int(hw)
	}
	out := map[string]int{}
	if total == 0 {
		return out, 0
	}
	for _, m := range e.cluster.ConsumeN(e.t, topic, total, 30*time.Second) {
		tag := ""
		for _, h := range m.Headers {
			if h.Key == resendtype.HeaderJobItem {
				tag = string(h.Value)
			}
		}
		out[tag]++
	}
	return out, total
}

// items returns the job's items with the given outcome ("" all, "pending").
func (e *env) items(id uuid.UUID, outcome string) []redrive.JobItem {
	e.t.Helper()
	var out []redrive.JobItem
	var after int64
	for {
		page, err := e.core.JobItems(context.Background(), operator.JobItemsRequest{JobID: id, Outcome: outcome, After: after, Limit: 500})
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, page.Items...)
		if page.Next == 0 {
			return out
		}
		after = page.Next
	}
}

// exactlyOnce checks that every item of the retry job id is done and its record was sent to
// topic exactly once, and that no other record was.
func (e *env) exactlyOnce(id uuid.UUID, topic string, ids []uuid.UUID) {
	e.t.Helper()
	j := e.job(id)
	if j.State != redrive.JobDone || j.Done != int64(len(ids)) || j.Skipped != 0 || j.Failed != 0 {
		e.t.Errorf("job = %+v, want DONE with %d done", j.Job, len(ids))
	}
	for _, it := range e.items(id, "") {
		if it.Outcome != redrive.JobItemDone {
			e.t.Errorf("item %d: %s (%v)", it.Seq, it.Outcome, it.Detail)
		}
	}
	if got := e.states(ids); got[redrive.StateResent] != len(ids) {
		e.t.Errorf("states = %v, want %d RESENT", got, len(ids))
	}
	byTag, total := e.sent(topic)
	if total != len(ids) || len(byTag) != len(ids) {
		e.t.Errorf("%d records on %s for %d distinct tags, want %d of each", total, topic, len(byTag), len(ids))
	}
	for tag, n := range byTag {
		if n != 1 {
			e.t.Errorf("record %q sent %d times", tag, n)
		}
	}
	audits := e.audits("retry")
	for fid, n := range audits {
		if n != 1 {
			e.t.Errorf("failure %s has %d retry entries, want 1", fid, n)
		}
	}
	for _, fid := range ids {
		if audits[fid] != 1 {
			e.t.Errorf("failure %s has %d retry entries, want 1", fid, audits[fid])
		}
	}
}
