package jobs_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/resend"
)

var _ jobs.ChainFollower = (*resend.Resender)(nil)

// A retry job that resends the head of an ordering chain has its resender resend the two
// failures parked behind it afterwards, in offset order, with audit entries that name the job.
func TestRetryJobFollowsChain(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, topic)
	head := testkit.InsertFailure(t, e.pool, testkit.FailureRow{Topic: topic, Offset: 10, Key: []byte("K"), Causing: "head"})
	second := testkit.InsertFailure(t, e.pool, testkit.FailureRow{Topic: topic, Offset: 12, Key: []byte("K"), Causing: "follower2", ErrorCode: avro.CodeParkedBehind})
	first := testkit.InsertFailure(t, e.pool, testkit.FailureRow{Topic: topic, Offset: 11, Key: []byte("K"), Causing: "follower1", ErrorCode: avro.CodeParkedBehind})
	id := e.start(operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{IDs: []uuid.UUID{head}}})
	e.run(jobs.Config{Publisher: e.instance().Resender()})
	e.waitJob(id, time.Minute, "done", done)
	all := []uuid.UUID{head, first, second}
	deadline := time.Now().Add(time.Minute)
	for e.states(all)[redrive.StateResent] != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("states %v, want all RESENT", e.states(all))
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	var order []string
	for _, m := range e.cluster.ConsumeN(t, topic, 3, 30*time.Second) {
		for _, h := range m.Headers {
			if h.Key == avro.HeaderOrigin {
				order = append(order, string(h.Value))
			}
		}
	}
	if want := []string{"head", "follower1", "follower2"}; !slices.Equal(order, want) {
		t.Errorf("records on the topic: %v, want %v", order, want)
	}
	for _, f := range []uuid.UUID{first, second} {
		var n int
		err := e.pool.QueryRow(context.Background(), `
			SELECT count(*) FROM audit_log WHERE failure_id = $1 AND action = 'retry' AND principal = 'alice'
			  AND details->>'job_id' = $2 AND details->>'head' = $3`, f, id.String(), head.String()).Scan(&n)
		if err != nil || n != 1 {
			t.Errorf("follower %s: %d audit entries (%v), want 1", f, n, err)
		}
	}
}
