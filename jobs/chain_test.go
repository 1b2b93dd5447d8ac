package jobs_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/resend"
)

var _ jobs.ChainFollower = (*resend.Resender)(nil)

// chainInstance is instance with chain hooks and a clock.
func (e *env) chainInstance(hooks resend.ChainHooks, now func() time.Time) (*resend.Scheduler, func()) {
	t := e.t
	sched, err := resend.New(resend.Config{
		Store: e.store, Brokers: e.cluster.Bootstrap(), ServiceName: "redrive-jobs-test",
		DisableAutomatic: true, Housekeeping: resend.HousekeepingConfig{Disable: true}, SendTimeout: 5 * time.Second,
		Interval: 20 * time.Millisecond, ChainHooks: hooks, Now: now,
		Producer: kafka.ConfigMap{"log_level": 3}, Registerer: prometheus.NewRegistry(), Logger: quiet(),
	})
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

// insertChain stores a head (causing message "head") and n failures parked behind it, stored
// in reverse offset order, and returns the head and the followers in offset order.
func (e *env) insertChain(topic string, n int) (uuid.UUID, []uuid.UUID) {
	head := testkit.InsertFailure(e.t, e.pool, testkit.FailureRow{Topic: topic, Offset: 10, Key: []byte("K"), Causing: "head"})
	followers := make([]uuid.UUID, n)
	for i := n - 1; i >= 0; i-- {
		followers[i] = testkit.InsertFailure(e.t, e.pool, testkit.FailureRow{Topic: topic, Offset: int64(11 + i), Key: []byte("K"),
			Causing: "follower" + string(rune('1'+i)), ErrorCode: avro.CodeParkedBehind, ParkedHead: "head"})
	}
	return head, followers
}

// origins returns the redrive-origin of every record on topic, in order.
func (e *env) origins(topic string, n int) []string {
	var out []string
	for _, m := range e.cluster.ConsumeN(e.t, topic, n, 30*time.Second) {
		for _, h := range m.Headers {
			if h.Key == avro.HeaderOrigin {
				out = append(out, string(h.Value))
			}
		}
	}
	return out
}

// waitStates polls until every one of ids is in state.
func (e *env) waitStates(ids []uuid.UUID, state redrive.State) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for e.states(ids)[state] != len(ids) {
		if time.Now().After(deadline) {
			e.t.Fatalf("states %v, want all %s", e.states(ids), state)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// A retry job that resends the head of an ordering chain releases the two failures parked
// behind it afterwards, in offset order, as items of the job: the job counts three items done,
// and the followers' audit entries name the job.
func TestRetryJobFollowsChain(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, topic)
	head, followers := e.insertChain(topic, 2)
	id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: []uuid.UUID{head}}})
	e.run(jobs.Config{Publisher: e.instance().Resender()})
	all := append([]uuid.UUID{head}, followers...)
	e.waitStates(all, redrive.StateResent)
	j := e.waitJob(id, time.Minute, "done with its followers", func(j *operator.JobView) bool { return j.State == redrive.JobDone && j.Done == 3 })
	if j.Total != 3 || j.Skipped != 0 || j.Failed != 0 {
		t.Errorf("job = %+v, want 3 items, all done", j.Job)
	}
	items := e.items(id, "")
	var got []uuid.UUID
	for _, it := range items {
		got = append(got, it.FailureID)
		if it.Outcome != redrive.JobItemDone {
			t.Errorf("item %d: %s %v", it.Seq, it.Outcome, it.Detail)
		}
	}
	if !slices.Equal(got, all) {
		t.Errorf("job items %v, want the head then its followers in offset order %v", got, all)
	}
	if order, want := e.origins(topic, 3), []string{"head", "follower1", "follower2"}; !slices.Equal(order, want) {
		t.Errorf("records on the topic: %v, want %v", order, want)
	}
	for _, f := range followers {
		var n int
		err := e.pool.QueryRow(context.Background(), `
			SELECT count(*) FROM audit_log WHERE failure_id = $1 AND action = 'retry' AND principal = 'alice'
			  AND details->>'job_id' = $2 AND details->>'head' = $3`, f, id.String(), head.String()).Scan(&n)
		if err != nil || n != 1 {
			t.Errorf("follower %s: %d audit entries (%v), want 1", f, n, err)
		}
	}
}

// A job's followers wait for the job's rate limiter: at 0.01 items per second the head takes
// the one token, and the followers wait; a pause ends the wait, and the followers are
// recorded as skipped (not attempted), keep their state, and nothing more is sent.
func TestRetryJobFollowersWaitForTheRateLimit(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, topic)
	head, followers := e.insertChain(topic, 2)
	id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: []uuid.UUID{head}}, RateLimit: operator.MinJobRate})
	e.run(jobs.Config{Publisher: e.instance().Resender(), Heartbeat: 20 * time.Millisecond})
	e.waitReleases(1) // the head was acknowledged, its followers wait
	if _, err := e.core.ChangeJob(context.Background(), id, "pause", operator.Reader{Principal: "bob"}); err != nil {
		t.Fatal(err)
	}
	j := e.waitJob(id, time.Minute, "with its followers skipped", func(j *operator.JobView) bool { return j.Skipped == 2 && j.Done == 1 })
	if j.Total != 3 || j.Done != 1 || j.Failed != 0 {
		t.Errorf("job = %+v, want 3 items: 1 done, 2 skipped", j.Job)
	}
	for _, it := range e.items(id, "skipped") {
		if it.Detail == nil || len(*it.Detail) < 13 || (*it.Detail)[:13] != "not attempted" {
			t.Errorf("skipped item %d: detail %v, want not attempted", it.Seq, it.Detail)
		}
	}
	if got := e.states(followers); got[redrive.StatePermanent] != 2 {
		t.Errorf("followers %v, want both PERMANENT", got)
	}
	if _, total := e.sent(topic); total != 1 {
		t.Errorf("%d records on the topic, want 1 (the head)", total)
	}
}

// An instance killed in the middle of a job's release (after the first follower was resent)
// leaves the release; another instance finishes it once the lease ended: every follower is
// resent exactly once, in order, and is exactly one done item of the job.
func TestRetryJobChainSurvivesAKill(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, topic)
	head, followers := e.insertChain(topic, 3)
	id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: []uuid.UUID{head}}})
	var killed atomic.Bool
	dead := make(chan struct{})
	first, stopFirst := e.chainInstance(resend.ChainHooks{AfterFollower: func(context.Context, uuid.UUID, uuid.UUID) error {
		if !killed.Swap(true) {
			close(dead)
		}
		return errors.New("killed")
	}}, nil)
	r := e.run(jobs.Config{Publisher: first.Resender()})
	select {
	case <-dead:
	case <-time.After(time.Minute):
		t.Fatal("the release never reached its first follower")
	}
	r.stop()
	stopFirst()
	if got := e.states(followers); got[redrive.StateResent] != 1 || got[redrive.StatePermanent] != 2 {
		t.Fatalf("followers after the kill: %v, want 1 RESENT and 2 PERMANENT", got)
	}
	// The next instance's clock is past the dead one's lease.
	e.chainInstance(resend.ChainHooks{}, func() time.Time { return time.Now().Add(10 * time.Minute) })
	e.waitStates(append([]uuid.UUID{head}, followers...), redrive.StateResent)
	e.waitReleases(0)
	j := e.waitJob(id, time.Minute, "done with its followers", func(j *operator.JobView) bool { return j.Done == 4 })
	if j.Total != 4 || j.Skipped != 0 || j.Failed != 0 || j.State != redrive.JobDone {
		t.Errorf("job = %+v, want DONE with 4 items done", j.Job)
	}
	if order, want := e.origins(topic, 4), []string{"head", "follower1", "follower2", "follower3"}; !slices.Equal(order, want) {
		t.Errorf("records on the topic: %v, want %v", order, want)
	}
	if _, total := e.sent(topic); total != 4 {
		t.Errorf("%d records on the topic, want 4", total)
	}
	for fid, n := range e.audits("retry") {
		if n != 1 {
			t.Errorf("failure %s has %d retry entries, want 1", fid, n)
		}
	}
	e.waitReleases(0)
}

// waitReleases polls until n chain releases are in progress.
func (e *env) waitReleases(n int) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var got int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM chain_releases`).Scan(&got); err != nil {
			e.t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d chain releases in progress, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}
