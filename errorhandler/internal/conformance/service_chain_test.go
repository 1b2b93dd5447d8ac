package conformance

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/intake"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

// TestOrderingGuardServiceResendsTheChain runs the guarded consumer against the service
// itself (intake, store, resender and operator core): a head retried by an operator is handed
// over, then its parked records in offset order; a head that keeps failing, closed with
// release, is never handed over, and the records parked behind it are.
func TestOrderingGuardServiceResendsTheChain(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		e.k.CreateTopic(t, testStateTopic, 1)
		e.k.Produce(t, keyed("a:a0", "a:a1", "c:c2", "a:a3", "c:c4")...)
		// a0 fails once (its resend is handled); c2 fails every time.
		l := newLedger(map[string]int{"orders/0/0": 1, "orders/0/2": 1 << 20})
		s := e.start(e.orderedConfig("service-chain-"+string(a), l, e.newOrderingStore()))
		defer func() {
			if err := s.stop(); err != nil {
				t.Error(err)
			}
		}()

		core, pool := startServiceCore(t, e)
		idOf := func(causing string) uuid.UUID {
			var id uuid.UUID
			waitFor(t, "the failure of "+causing+" stored", func() bool {
				return pool.QueryRow(context.Background(), `SELECT id FROM failures WHERE causing_message = $1 ORDER BY attempt DESC LIMIT 1`, causing).Scan(&id) == nil
			})
			return id
		}
		headA, headC := idOf("orders/0/0"), idOf("orders/0/2")
		idOf("orders/0/1")
		idOf("orders/0/3")
		idOf("orders/0/4")
		ctx := t.Context()

		res, err := core.Act(ctx, operator.ActionRequest{Action: operator.Retry, Principal: "otto",
			Selection: operator.Selection{IDs: []uuid.UUID{headA}}})
		if err != nil || res.Items[0].Outcome != operator.OutcomeResent || len(res.Parked) != 2 {
			t.Fatalf("retry of the head: %+v %v", res, err)
		}
		want := []string{"orders/0/0", "orders/0/1", "orders/0/3"}
		waitFor(t, "key a handed over in order", func() bool { return len(l.succeeded()["a"]) >= len(want) })
		if got := l.succeeded()["a"]; !slices.Equal(got, want) {
			t.Errorf("key a handled %v, want %v", got, want)
		}

		res, err = core.Act(ctx, operator.ActionRequest{Action: operator.Close, Release: true, Principal: "otto", Reason: "given up",
			Selection: operator.Selection{IDs: []uuid.UUID{headC}}})
		if err != nil || res.Items[0].Outcome != operator.OutcomeClosed || len(res.Parked) != 1 || res.Parked[0].Outcome != operator.OutcomeResent {
			t.Fatalf("close with release: %+v %v", res, err)
		}
		waitFor(t, "key c's parked record handed over", func() bool { return len(l.succeeded()["c"]) >= 1 })
		if got := l.succeeded()["c"]; !slices.Equal(got, []string{"orders/0/4"}) {
			t.Errorf("key c handled %v, want only the record parked behind the closed head", got)
		}
	})
}

// newServiceIntake returns a fresh database with the service's store on it, and the service's
// intake (not yet running) from the env's error topic into that store.
func newServiceIntake(t *testing.T, e *env) (*pgxpool.Pool, *store.Store, *intake.Intake) {
	t.Helper()
	pool := testkit.Postgres(t)
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	e.k.CreateTopic(t, testErrTopic+"-dlt", 1)
	in, err := intake.New(intake.Config{
		Store:           st,
		NextAttempt:     func(_ int, now time.Time) (time.Time, bool) { return now.Add(time.Hour), true },
		Bootstrap:       e.k.Bootstrap(),
		Topic:           testErrTopic,
		DeadLetterTopic: testErrTopic + "-dlt",
		BatchWait:       10 * time.Millisecond,
		Logger:          testLogger(t),
		Registerer:      prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return pool, st, in
}

// startServiceCore runs the service's intake over the env's error topic into a fresh
// database, and a resender (no automatic resends) under an operator core.
func startServiceCore(t *testing.T, e *env) (*operator.Core, *pgxpool.Pool) {
	t.Helper()
	pool, st, in := newServiceIntake(t, e)
	sched, err := resend.New(resend.Config{
		Store: st, Brokers: e.k.Bootstrap(), ServiceName: "redrive-conformance",
		DisableAutomatic: true, Housekeeping: resend.HousekeepingConfig{Disable: true},
		Producer: kafka.ConfigMap{"log_level": 3}, Registerer: prometheus.NewRegistry(), Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- in.Run(ctx) }()
	go func() { done <- sched.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("service: %v", err)
			}
		}
	})
	core, err := operator.New(operator.Config{Store: st, Resender: sched.Resender(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return core, pool
}
