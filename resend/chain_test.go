package resend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// A TEMPORARY head due for retry is followed, after the broker acknowledged it, by the two
// failures the ordering guard parked behind it, in offset order, each with an audit entry of
// the automatic trigger; a failure of another key with no parked failures is resent as
// before, alone and without an audit entry.
func TestSchedulerResendsParkedFollowers(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	s := e.scheduler(t, nil)
	key := []byte("K")
	head := e.insertFailure(t, row{Topic: topic, Offset: 10, Key: key, Causing: "head"})
	// Stored out of offset order: the chain's order is the offsets'.
	second := e.insertFailure(t, row{Topic: topic, Offset: 12, Key: key, Causing: "follower2",
		State: store.StatePermanent, Temporality: avro.Permanent, ErrorCode: avro.CodeParkedBehind, ParkedHead: "head"})
	first := e.insertFailure(t, row{Topic: topic, Offset: 11, Key: key, Causing: "follower1",
		State: store.StatePermanent, Temporality: avro.Permanent, ErrorCode: avro.CodeParkedBehind, ParkedHead: "head"})
	lone := e.insertFailure(t, row{Topic: topic, Offset: 13, Key: []byte("L"), Causing: "lone"})

	st, err := s.round(context.Background())
	if err != nil || st.claimed != 2 || st.resent != 4 || st.failed != 0 {
		t.Fatalf("round: %+v, %v; want 2 claimed and 4 resent", st, err)
	}
	for name, id := range map[string]uuid.UUID{"head": head, "follower1": first, "follower2": second, "lone": lone} {
		if f := e.failure(t, id); f.State != redrive.StateResent {
			t.Errorf("%s: %s, want RESENT", name, f.State)
		}
	}
	var order []string
	for _, m := range e.cluster.ConsumeN(t, topic, 4, time.Minute) {
		for _, h := range m.Headers {
			if h.Key == avro.HeaderOrigin && string(h.Value) != "lone" {
				order = append(order, string(h.Value))
			}
		}
	}
	if want := []string{"head", "follower1", "follower2"}; !slices.Equal(order, want) {
		t.Errorf("the key's records on the topic: %v, want %v", order, want)
	}
	if got := e.records(topic); got != 4 {
		t.Errorf("topic holds %d records, want 4", got)
	}
	ctx := context.Background()
	for name, c := range map[string]struct {
		id   uuid.UUID
		want int
	}{"head": {head, 0}, "follower1": {first, 1}, "follower2": {second, 1}, "lone": {lone, 0}} {
		var n int
		err := e.pool.QueryRow(ctx, `
			SELECT count(*) FROM audit_log WHERE failure_id = $1 AND action = 'retry' AND principal = 'redrive-test'
			  AND details->>'trigger' = 'auto' AND details->>'ordering_chain' = 'true' AND details->>'head' = $2`,
			c.id, head.String()).Scan(&n)
		if err != nil || n != c.want {
			t.Errorf("%s: %d chain audit entries (%v), want %d", name, n, err, c.want)
		}
	}
}

// A parked failure that cannot be resent (another resend holds it) stops its chain: the
// failures after it keep their state, so the key's order is not broken; the head is RESENT.
func TestSchedulerChainStopsAtAFollowerNotResent(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	s := e.scheduler(t, nil)
	key := []byte("K")
	owner, until := "elsewhere", e.clock.Now().Add(time.Hour)
	head := e.insertFailure(t, row{Topic: topic, Offset: 10, Key: key, Causing: "head"})
	first := e.insertFailure(t, row{Topic: topic, Offset: 11, Key: key, Causing: "follower1",
		State: store.StatePermanent, Temporality: avro.Permanent, ErrorCode: avro.CodeParkedBehind,
		LeaseOwner: &owner, LeaseUntil: &until, ParkedHead: "head"})
	second := e.insertFailure(t, row{Topic: topic, Offset: 12, Key: key, Causing: "follower2",
		State: store.StatePermanent, Temporality: avro.Permanent, ErrorCode: avro.CodeParkedBehind, ParkedHead: "head"})

	st, err := s.round(context.Background())
	if err != nil || st.resent != 1 || st.failed != 2 {
		t.Fatalf("round: %+v, %v; want 1 resent and 2 not", st, err)
	}
	if f := e.failure(t, head); f.State != redrive.StateResent {
		t.Errorf("head: %s, want RESENT", f.State)
	}
	for name, id := range map[string]uuid.UUID{"follower1": first, "follower2": second} {
		if f := e.failure(t, id); f.State != redrive.StatePermanent {
			t.Errorf("%s: %s, want PERMANENT", name, f.State)
		}
	}
	if got := e.records(topic); got != 1 {
		t.Errorf("topic holds %d records, want 1 (the head)", got)
	}
}

// chainOf stores a head (causing message "head") of key K on topic and n failures parked
// behind it, stored in reverse offset order, and returns the head and the followers in
// offset order.
func (e *env) chainOf(t *testing.T, topic string, n int, headState store.State) (uuid.UUID, []uuid.UUID) {
	head := e.insertFailure(t, row{Topic: topic, Offset: 10, Key: []byte("K"), Causing: "head", State: headState, Temporality: avro.Permanent})
	followers := make([]uuid.UUID, n)
	for i := n - 1; i >= 0; i-- {
		followers[i] = e.insertFailure(t, row{Topic: topic, Offset: int64(11 + i), Key: []byte("K"), Causing: fmt.Sprintf("follower%d", i+1),
			State: store.StatePermanent, Temporality: avro.Permanent, ErrorCode: avro.CodeParkedBehind, ParkedHead: "head"})
	}
	return head, followers
}

// killAfter returns chain hooks that stop a release after its nth follower, as a crash would.
func killAfter(nth int) ChainHooks {
	var n atomic.Int64
	return ChainHooks{AfterFollower: func(context.Context, uuid.UUID, uuid.UUID) error {
		if n.Add(1) >= int64(nth) {
			return errors.New("killed")
		}
		return nil
	}}
}

// checkReleased checks that the records on topic are the origins want, in order, each with
// the release header when release is set, and that each follower has one retry audit entry.
func (e *env) checkReleased(t *testing.T, topic string, want []string, release bool, followers []uuid.UUID) {
	t.Helper()
	if got := e.records(topic); got != int64(len(want)) {
		t.Errorf("topic holds %d records, want %d", got, len(want))
	}
	var order []string
	for _, m := range e.cluster.ConsumeN(t, topic, len(want), time.Minute) {
		var origin, rel string
		for _, h := range m.Headers {
			switch h.Key {
			case avro.HeaderOrigin:
				origin = string(h.Value)
			case avro.HeaderRelease:
				rel = string(h.Value)
			}
		}
		order = append(order, origin)
		if release && origin != "head" && rel != "head" {
			t.Errorf("%s carries %s %q, want the head's causing message", origin, avro.HeaderRelease, rel)
		}
	}
	if !slices.Equal(order, want) {
		t.Errorf("records on the topic: %v, want %v", order, want)
	}
	for i, id := range followers {
		if f := e.failure(t, id); f.State != store.StateResent {
			t.Errorf("follower%d: %s, want RESENT", i+1, f.State)
		}
		var n int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE failure_id = $1 AND action = 'retry'`, id).Scan(&n); err != nil || n != 1 {
			t.Errorf("follower%d: %d retry entries (%v), want 1", i+1, n, err)
		}
	}
	var left int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM chain_releases`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d releases left (%v), want 0", left, err)
	}
}

// An instance that ends in the middle of a release — the head closed with release, its first
// follower resent — leaves the release; another instance finishes it once its lease ended:
// every follower is resent once, in offset order, with the release header. An instance that
// finds the release still leased leaves it alone.
func TestReleaseSurvivesAnInstanceEnd(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	head, followers := e.chainOf(t, topic, 3, store.StateClosed)
	dead := e.scheduler(t, func(c *Config) { c.ChainHooks = killAfter(1) })
	out, err := dead.Resender().FollowChains(context.Background(), ChainRequest{Heads: []uuid.UUID{head}, Release: true,
		Request: ManualRequest{Principal: "alice", Reason: "given up"}})
	if err != nil || len(out) != 1 || len(out[0].Items) != 1 || out[0].Items[0].Outcome != OutcomeResent {
		t.Fatalf("release killed after its first follower: %+v %v", out, err)
	}
	next := e.scheduler(t, nil)
	if n, err := next.Resender().ResumeChainReleases(context.Background()); err != nil || n != 0 {
		t.Fatalf("resume within the lease: %d %v, want nothing", n, err)
	}
	e.clock.Advance(time.Hour) // past the dead instance's lease
	if n, err := next.Resender().ResumeChainReleases(context.Background()); err != nil || n != 1 {
		t.Fatalf("resume after the lease: %d %v, want 1", n, err)
	}
	e.checkReleased(t, topic, []string{"follower1", "follower2", "follower3"}, true, followers)
}

// A follower whose record reached the broker, but whose instance ended before it recorded so,
// is marked RESENT by the instance that finishes the release, not sent again; the ones after
// it are sent, in order.
func TestResumedReleaseDoesNotResendAnArrivedFollower(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	_, followers := e.chainOf(t, topic, 3, store.StateRetryPending)
	dead := e.scheduler(t, func(c *Config) { c.ChainHooks = killAfter(1) })
	// The head's automatic resend, acknowledged, then its release, killed after follower1.
	if _, err := dead.round(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rel uuid.UUID
	if err := e.pool.QueryRow(context.Background(), `SELECT id FROM chain_releases`).Scan(&rel); err != nil {
		t.Fatalf("the release in progress: %v", err)
	}
	// follower2's record arrived; its instance ended before it was marked.
	e.cluster.Produce(t, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: avro.Ptr(topic), Partition: kafka.PartitionAny},
		Key: []byte("K"), Value: []byte("value"), Headers: []kafka.Header{{Key: avro.HeaderOrigin, Value: []byte("follower2")},
			{Key: resendtype.HeaderReleaseItem, Value: []byte(rel.String() + "/" + followers[1].String())}}})
	e.clock.Advance(time.Hour)
	next := e.scheduler(t, nil)
	if n, err := next.Resender().ResumeChainReleases(context.Background()); err != nil || n != 1 {
		t.Fatalf("resume: %d %v, want 1", n, err)
	}
	e.checkReleased(t, topic, []string{"head", "follower1", "follower2", "follower3"}, false, followers)
	var recovered bool
	if err := e.pool.QueryRow(context.Background(), `SELECT details->>'recovered' = 'true' FROM audit_log WHERE failure_id = $1`, followers[1]).Scan(&recovered); err != nil || !recovered {
		t.Errorf("follower2's entry: recovered %v (%v), want true", recovered, err)
	}
}

// A manual release (an operator's retry of the head) waits for the manual rate limit for each
// follower: with a burst of one taken and a rate of one per hour, a follower cannot be sent
// before ctx ends, and is reported not attempted, keeping its state.
func TestManualReleaseWaitsForTheRateLimit(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	head, followers := e.chainOf(t, topic, 2, store.StateResent)
	s := e.scheduler(t, func(c *Config) { c.ManualRate, c.ManualBurst = 1.0/3600, 1 })
	s.resender.limiter.Allow() // the head's token
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			var n int
			if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM chain_releases`).Scan(&n); err == nil && n == 1 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond) // polling for the release to wait
		}
	}()
	out, err := s.Resender().FollowChains(ctx, ChainRequest{Heads: []uuid.UUID{head}, Request: ManualRequest{Principal: "alice"}})
	if err != nil || len(out) != 1 || len(out[0].Items) != 2 {
		t.Fatalf("follow: %+v %v", out, err)
	}
	for i, it := range out[0].Items {
		if it.Outcome != OutcomeFailed || !strings.HasPrefix(it.Error, "not attempted") {
			t.Errorf("follower%d: %s %q, want not attempted", i+1, it.Outcome, it.Error)
		}
		if f := e.failure(t, followers[i]); f.State != store.StatePermanent {
			t.Errorf("follower%d: %s, want PERMANENT", i+1, f.State)
		}
	}
	if got := e.records(topic); got != 0 {
		t.Errorf("topic holds %d records, want none", got)
	}
}
