package resend

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
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
		if f := e.failure(t, id); f.State != store.StateResent {
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
	if f := e.failure(t, head); f.State != store.StateResent {
		t.Errorf("head: %s, want RESENT", f.State)
	}
	for name, id := range map[string]uuid.UUID{"follower1": first, "follower2": second} {
		if f := e.failure(t, id); f.State != store.StatePermanent {
			t.Errorf("%s: %s, want PERMANENT", name, f.State)
		}
	}
	if got := e.records(topic); got != 1 {
		t.Errorf("topic holds %d records, want 1 (the head)", got)
	}
}
