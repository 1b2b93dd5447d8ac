package store_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

// fixtureRow describes a failure row for the query tests; zero fields get defaults.
// fixtureRow and insertFixture are the test kit's direct-SQL failure fixture.
type fixtureRow = testkit.FailureRow

func insertFixture(t testing.TB, pool *pgxpool.Pool, r fixtureRow) uuid.UUID {
	t.Helper()
	return testkit.InsertFailure(t, pool, r)
}

func fixtureStore(t testing.TB) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return s, pool
}

func listIDs(t *testing.T, s *store.Store, p store.ListParams) []uuid.UUID {
	t.Helper()
	rows, _, err := s.ListFailures(context.Background(), p)
	if err != nil {
		t.Fatalf("ListFailures: %v", err)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

func TestListFailuresPagesInOrder(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	// Groups of three rows share a created_at: the id breaks the tie.
	want := map[uuid.UUID]time.Time{}
	for i := range 30 {
		at := base.Add(time.Duration(i/3) * time.Second)
		want[insertFixture(t, pool, fixtureRow{CreatedAt: at})] = at
	}
	for _, order := range []store.Order{store.NewestFirst, store.OldestFirst} {
		var (
			got   []store.FailureSummary
			after *store.Position
		)
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("too many pages")
			}
			rows, more, err := s.ListFailures(ctx, store.ListParams{Order: order, After: after, Limit: 7})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
			if !more {
				break
			}
			p := rows[len(rows)-1].Position()
			after = &p
		}
		if len(got) != len(want) {
			t.Fatalf("order %d: got %d rows, want %d", order, len(got), len(want))
		}
		sorted := sort.SliceIsSorted(got, func(i, j int) bool {
			a, b := got[i], got[j]
			less := a.CreatedAt.Before(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && strings.Compare(a.ID.String(), b.ID.String()) < 0
			if order == store.NewestFirst {
				return !less
			}
			return less
		})
		if !sorted {
			t.Errorf("order %d: rows are not sorted", order)
		}
		seen := map[uuid.UUID]bool{}
		for _, r := range got {
			if seen[r.ID] {
				t.Errorf("order %d: %s listed twice", order, r.ID)
			}
			seen[r.ID] = true
			if !r.CreatedAt.Equal(want[r.ID]) {
				t.Errorf("created_at of %s = %v, want %v", r.ID, r.CreatedAt, want[r.ID])
			}
		}
	}
}

func TestListFailuresSummary(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	long := strings.Repeat("é", 800)
	id := insertFixture(t, pool, fixtureRow{ErrorMessage: long, Key: []byte("k1"), Value: []byte("12345")})
	nullKey := insertFixture(t, pool, fixtureRow{NullKey: true, CreatedAt: time.Now().Add(-time.Minute)})
	rows, more, err := s.ListFailures(context.Background(), store.ListParams{Limit: 10})
	if err != nil || more || len(rows) != 2 {
		t.Fatalf("ListFailures = %d rows, more %v, %v", len(rows), more, err)
	}
	r := rows[0]
	if r.ID != id || *r.KeySize != 2 || r.ValueSize != 5 || r.Topic != "orders" || r.State != store.StatePermanent {
		t.Errorf("summary = %+v", r)
	}
	if n := len([]rune(r.ErrorMessage)); n != 500 {
		t.Errorf("summary error message has %d characters, want 500", n)
	}
	if rows[1].ID != nullKey || rows[1].KeySize != nil {
		t.Errorf("null key summary = %+v", rows[1])
	}
}

func TestListFailuresRejectsBadParams(t *testing.T) {
	t.Parallel()
	s, _ := fixtureStore(t)
	for _, p := range []store.ListParams{
		{Limit: 0}, {Limit: store.MaxListLimit + 1},
		{Limit: 1, Filter: store.Filter{States: []store.State{"NOPE"}}},
	} {
		if _, _, err := s.ListFailures(context.Background(), p); err == nil {
			t.Errorf("ListFailures(%+v) succeeded", p)
		}
	}
}

func TestFailureByIDAttemptChainAndAudit(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	first := insertFixture(t, pool, fixtureRow{State: store.StateResent, Causing: "order-7", Attempt: 1, CreatedAt: base})
	second := insertFixture(t, pool, fixtureRow{State: store.StateRetryPending, Causing: "order-7", Attempt: 2, CreatedAt: base.Add(time.Minute),
		HeaderNames: []string{"a", "b", "a"}, HeaderValues: [][]byte{[]byte("1"), nil, {0xff}}, NullKey: true, Value: []byte{}})
	insertFixture(t, pool, fixtureRow{Causing: "other"})

	d, err := s.FailureByID(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != second || d.Key != nil || d.Value == nil || len(d.Value) != 0 || d.Attempt != 2 || d.NextAttemptAt == nil {
		t.Errorf("detail = %+v", d.Failure)
	}
	wantHeaders := []avro.Header{{Name: "a", Value: []byte("1")}, {Name: "b"}, {Name: "a", Value: []byte{0xff}}}
	if fmt.Sprint(d.Headers) != fmt.Sprint(wantHeaders) || d.Headers[1].Value != nil {
		t.Errorf("headers = %v, want %v", d.Headers, wantHeaders)
	}
	chain, err := s.AttemptChain(ctx, "order-7", 10)
	if err != nil || len(chain) != 2 || chain[0].ID != first || chain[1].ID != second {
		t.Fatalf("AttemptChain = %v, %v", chain, err)
	}
	if _, err := s.FailureByID(ctx, uuid.New()); err != store.ErrNotFound {
		t.Errorf("FailureByID(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.CloseFailure(ctx, second, "alice", "known issue"); err != nil {
		t.Fatal(err)
	}
	audit, err := s.FailureAudit(ctx, second, 10)
	if err != nil || len(audit) != 1 {
		t.Fatalf("FailureAudit = %v, %v", audit, err)
	}
	if e := audit[0]; e.Action != store.AuditActionClose || e.Principal != "alice" || *e.Reason != "known issue" || e.Details["from_state"] != "RETRY_PENDING" {
		t.Errorf("audit entry = %+v", e)
	}
}

func TestCountAndFailureIDs(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	var want []uuid.UUID
	for i := range 12 {
		st := store.StatePermanent
		if i%3 == 0 {
			st = store.StateResent
		}
		id := insertFixture(t, pool, fixtureRow{State: st, Topic: "t", CreatedAt: base.Add(time.Duration(i) * time.Second)})
		if st == store.StatePermanent {
			want = append(want, id)
		}
	}
	f := store.Filter{Topic: "t"}
	if n, err := s.CountFailures(ctx, f); err != nil || n != 12 {
		t.Errorf("CountFailures = %d, %v; want 12", n, err)
	}
	if n, err := s.CountFailures(ctx, f, store.StatePermanent, store.StateRetryPending); err != nil || n != 8 {
		t.Errorf("CountFailures(open) = %d, %v; want 8", n, err)
	}
	var got []uuid.UUID
	var after *store.Position
	for {
		ids, last, err := s.FailureIDs(ctx, f, []store.State{store.StatePermanent}, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			break
		}
		got, after = append(got, ids...), last
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("FailureIDs = %v, want %v", got, want)
	}
}

func TestExplainList(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	insertFixture(t, pool, fixtureRow{})
	plan, err := s.ExplainList(context.Background(), store.ListParams{Limit: 5, Filter: store.Filter{Topic: "orders"}})
	if err != nil || !strings.Contains(plan, "Execution Time") {
		t.Errorf("ExplainList = %q, %v", plan, err)
	}
}
