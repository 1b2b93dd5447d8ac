package resend

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

// onCluster moves the failure id to the named cluster.
func (e *env) onCluster(t *testing.T, id uuid.UUID, cluster string) {
	t.Helper()
	if _, err := e.pool.Exec(context.Background(), `UPDATE failures SET cluster = $2 WHERE id = $1`, id, cluster); err != nil {
		t.Fatal(err)
	}
}

// Each failure is resent to its own cluster; a failure of a cluster that is not configured,
// or a resend to another cluster without a route, is not sent; a cluster that goes down makes
// its records fail at once while the other cluster's go on.
func TestSchedulerRoutesByCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]int{"orders": 1})
	b := testkit.Kafka(t)
	b.CreateTopic(t, "orders", 1)
	s := e.scheduler(t, func(c *Config) {
		c.Brokers = ""
		c.Clusters = []Cluster{{Name: "a", Brokers: e.cluster.Bootstrap()}, {Name: "b", Brokers: b.Bootstrap()}}
		c.CrossCluster = []Route{{From: "a", To: "b"}}
		c.SendTimeout = 2 * time.Second
	})
	ctx := context.Background()

	onA := e.insertFailure(t, row{Value: []byte("to-a")})
	e.onCluster(t, onA, "a")
	onB := e.insertFailure(t, row{Value: []byte("to-b")})
	e.onCluster(t, onB, "b")
	gone := e.insertFailure(t, row{Value: []byte("to-gone")})
	e.onCluster(t, gone, "gone")
	st, err := s.round(ctx)
	if err != nil || st.resent != 2 || st.failed != 1 {
		t.Fatalf("round: %+v, %v", st, err)
	}
	if got := e.cluster.ConsumeN(t, "orders", 1, 20*time.Second); string(got[0].Value) != "to-a" {
		t.Errorf("cluster a got %q", got[0].Value)
	}
	if got := b.ConsumeN(t, "orders", 1, 20*time.Second); string(got[0].Value) != "to-b" {
		t.Errorf("cluster b got %q", got[0].Value)
	}
	if f := e.failure(t, gone); f.State != store.StateRetryPending || f.LastResendError == nil ||
		!strings.Contains(*f.LastResendError, "not configured") {
		t.Errorf("failure of an unknown cluster: %+v", f)
	}

	// Manual resends to another cluster: along the route a→b, not b→a.
	r := s.Resender()
	fromA := e.insertFailure(t, row{Value: []byte("a-to-b")})
	e.onCluster(t, fromA, "a")
	fromB := e.insertFailure(t, row{Value: []byte("b-to-a")})
	e.onCluster(t, fromB, "b")
	res, err := r.ResendIDs(ctx, []uuid.UUID{fromA}, ManualRequest{Principal: "alice", TargetCluster: "b"})
	if err != nil || res.Resent != 1 {
		t.Fatalf("resend to b: %+v, %v", res, err)
	}
	if got := b.ConsumeN(t, "orders", 2, 20*time.Second); string(got[1].Value) != "a-to-b" {
		t.Errorf("cluster b got %q, want a-to-b", got[1].Value)
	}
	res, err = r.ResendIDs(ctx, []uuid.UUID{fromB}, ManualRequest{Principal: "alice", TargetCluster: "a"})
	if err != nil || res.Resent != 0 || !strings.Contains(res.Items[0].Error, "not allowed") {
		t.Errorf("resend from b to a without a route: %+v, %v", res, err)
	}
	if _, err := r.ResendIDs(ctx, []uuid.UUID{fromB}, ManualRequest{Principal: "alice", TargetCluster: "mars"}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("resend to an unknown cluster = %v, want ErrInvalidRequest", err)
	}
	if !r.CrossClusterAllowed("a", "b") || r.CrossClusterAllowed("b", "a") || !r.CrossClusterAllowed("b", "b") || r.CrossClusterAllowed("a", "mars") {
		t.Error("CrossClusterAllowed does not follow the routes")
	}

	// b goes down: its records wait, a's go on.
	b.Fake().Close()
	downB := e.insertFailure(t, row{Value: []byte("b-down")})
	e.onCluster(t, downB, "b")
	if _, err := s.round(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.ClusterErr(ctx, "b"); err == nil {
		t.Fatal("cluster b is down, ClusterErr says nothing")
	}
	if err := s.ClusterErr(ctx, "a"); err != nil {
		t.Errorf("cluster a: %v", err)
	}
	e.clock.Advance(time.Hour) // b's failure is due again
	upA := e.insertFailure(t, row{Value: []byte("a-still-up")})
	e.onCluster(t, upA, "a")
	start := time.Now()
	st, err = s.round(ctx)
	if err != nil || st.resent != 1 {
		t.Fatalf("round with b down: %+v, %v", st, err)
	}
	if f := e.failure(t, downB); f.LastResendError == nil || !strings.Contains(*f.LastResendError, "unreachable") {
		t.Errorf("failure of the cluster down: %+v", f)
	}
	t.Logf("round with b down took %s", time.Since(start))
	if got := e.cluster.ConsumeN(t, "orders", 2, 20*time.Second); string(got[1].Value) != "a-still-up" {
		t.Errorf("cluster a got %q", got[1].Value)
	}
}

func TestConfigClusters(t *testing.T) {
	t.Parallel()
	st := &store.Store{}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Store: st, Clusters: []Cluster{{Name: "A b", Brokers: "k"}}}, "Clusters[0].Name"},
		{Config{Store: st, Clusters: []Cluster{{Name: "a", Brokers: "k"}, {Name: "a", Brokers: "k"}}}, "given twice"},
		{Config{Store: st, Clusters: []Cluster{{Name: "a"}}}, "Clusters[0] (a): Brokers is required"},
		{Config{Store: st, Clusters: []Cluster{{Name: "a", Brokers: "k"}}, CrossCluster: []Route{{From: "a", To: "b"}}}, `cluster "b" is not configured`},
		{Config{Store: st, Brokers: "k", CrossCluster: []Route{{From: "default", To: "x"}}}, `cluster "x" is not configured`},
	} {
		if _, err := c.cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
