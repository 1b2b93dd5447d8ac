package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/store"
)

func TestCloseFailures(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	pending := insertFixture(t, pool, fixtureRow{State: store.StateRetryPending})
	permanent := insertFixture(t, pool, fixtureRow{State: store.StatePermanent})
	resent := insertFixture(t, pool, fixtureRow{State: store.StateResent})
	closed := insertFixture(t, pool, fixtureRow{State: store.StateClosed})
	lease := time.Now().Add(time.Minute)
	leased := insertFixture(t, pool, fixtureRow{State: store.StatePermanent, LeaseUntil: &lease})
	missing := uuid.New()

	ids := []uuid.UUID{pending, permanent, resent, closed, leased, missing, pending}
	res, err := s.CloseFailures(ctx, store.CloseRequest{IDs: ids, Principal: "bob", Reason: "duplicate", Details: map[string]any{"bulk_id": "b1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id      uuid.UUID
		outcome store.CloseOutcome
		state   store.State
	}{
		{pending, store.CloseClosed, store.StateRetryPending},
		{permanent, store.CloseClosed, store.StatePermanent},
		{resent, store.CloseConflict, store.StateResent},
		{closed, store.CloseConflict, store.StateClosed},
		{leased, store.CloseConflict, store.StatePermanent},
		{missing, store.CloseNotFound, ""},
	}
	if len(res) != len(want) {
		t.Fatalf("got %d results, want %d (duplicates count once): %+v", len(res), len(want), res)
	}
	for i, w := range want {
		if r := res[i]; r.ID != w.id || r.Outcome != w.outcome || r.State != w.state || (r.Outcome == store.CloseClosed) != (r.Detail == "") {
			t.Errorf("result %d = %+v, want %v %s from %s", i, r, w.id, w.outcome, w.state)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM failures WHERE state = 'CLOSED' AND closed_by = 'bob'
		AND closed_reason = 'duplicate' AND closed_at IS NOT NULL AND next_attempt_at IS NULL`).Scan(&n); err != nil || n != 2 {
		t.Errorf("closed rows = %d, %v; want 2", n, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'close' AND principal = 'bob'
		AND reason = 'duplicate' AND details->>'bulk_id' = 'b1' AND failure_id = ANY($1)`, []uuid.UUID{pending, permanent}).Scan(&n); err != nil || n != 2 {
		t.Errorf("audit entries = %d, %v; want 2", n, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&n); err != nil || n != 2 {
		t.Errorf("audit log has %d entries, want 2 (none for conflicts)", n)
	}
}

func TestCloseFailureErrors(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	resent := insertFixture(t, pool, fixtureRow{State: store.StateResent})
	if err := s.CloseFailure(ctx, uuid.New(), "a", "r"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("close unknown = %v, want ErrNotFound", err)
	}
	err := s.CloseFailure(ctx, resent, "a", "r")
	var te *store.TransitionError
	if !errors.As(err, &te) || te.From != store.StateResent || !errors.Is(err, store.ErrConflict) {
		t.Errorf("close RESENT = %v, want a TransitionError from RESENT", err)
	}
	many := make([]uuid.UUID, store.MaxCloseIDs+1)
	for i := range many {
		many[i] = uuid.New()
	}
	for _, req := range []store.CloseRequest{
		{IDs: []uuid.UUID{resent}, Reason: "r"},
		{IDs: []uuid.UUID{resent}, Principal: "a"},
		{IDs: many, Principal: "a", Reason: "r"},
	} {
		if _, err := s.CloseFailures(ctx, req); err == nil {
			t.Errorf("CloseFailures(%d ids, %q, %q) succeeded", len(req.IDs), req.Principal, req.Reason)
		}
	}
}

// Concurrent closes of the same failures: each is closed once, with one audit entry.
func TestCloseFailuresConcurrently(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	var ids []uuid.UUID
	for range 20 {
		ids = append(ids, insertFixture(t, pool, fixtureRow{}))
	}
	reversed := make([]uuid.UUID, len(ids))
	for i, id := range ids {
		reversed[len(ids)-1-i] = id
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		closed int
	)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := ids
			if i%2 == 1 {
				batch = reversed
			}
			res, err := s.CloseFailures(ctx, store.CloseRequest{IDs: batch, Principal: "p", Reason: "r"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range res {
				if r.Outcome == store.CloseClosed {
					closed++
				}
			}
		}()
	}
	wg.Wait()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'close'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if closed != len(ids) || n != len(ids) {
		t.Errorf("closed %d times with %d audit entries, want %d each", closed, n, len(ids))
	}
}

func TestActionStates(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	lease := time.Now().Add(time.Minute)
	a := insertFixture(t, pool, fixtureRow{State: store.StateRetryPending, LeaseUntil: &lease})
	b := insertFixture(t, pool, fixtureRow{State: store.StateResent})
	got, err := s.ActionStates(context.Background(), []uuid.UUID{a, b, uuid.New()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[a] != (store.ActionState{State: store.StateRetryPending, Leased: true}) || got[b] != (store.ActionState{State: store.StateResent}) {
		t.Errorf("ActionStates = %+v", got)
	}
}
