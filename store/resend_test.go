package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

// resendTestInsert inserts a RETRY_PENDING failure due at due and returns its id.
func resendTestInsert(t *testing.T, pool *pgxpool.Pool, due time.Time, headers map[string][]byte) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var groupID int64
	if err := pool.QueryRow(ctx, `
		INSERT INTO failure_groups (publisher_service, error_code) VALUES ('svc', 'E')
		ON CONFLICT ON CONSTRAINT failure_groups_kind_key DO UPDATE SET last_seen = now()
		RETURNING id`).Scan(&groupID); err != nil {
		t.Fatal(err)
	}
	names, values := []string{}, [][]byte{}
	for k, v := range headers {
		names, values = append(names, k), append(values, v)
	}
	var id uuid.UUID
	if err := pool.QueryRow(ctx, `
		INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id,
			event_created, publisher_system, publisher_service, original_topic, original_partition,
			original_offset, original_key, original_value, header_names, header_values, causing_message,
			next_attempt_at, group_id)
		VALUES ('RETRY_PENDING', 'TEMPORARY', 'E', 'boom', gen_random_uuid()::text, gen_random_uuid()::text,
			now(), 'sys', 'svc', 't', 0, 7, NULL, ''::bytea, $1, $2, 'cause', $3, $4)
		RETURNING id`, names, values, due, groupID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// resendTestStore returns a store on a fresh database and the tests' now.
func resendTestStore(t *testing.T) (context.Context, *pgxpool.Pool, *store.Store, time.Time) {
	t.Helper()
	pool := testkit.Postgres(t)
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return context.Background(), pool, st, time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
}

// claimCount counts the claims in resend_claims.
func claimCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM resend_claims`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestClaimDueResendsHoldsUntilReleasedOrExpired(t *testing.T) {
	ctx, pool, st, now := resendTestStore(t)
	first := resendTestInsert(t, pool, now.Add(-3*time.Second), map[string][]byte{"h": nil})
	second := resendTestInsert(t, pool, now.Add(-2*time.Second), nil)
	third := resendTestInsert(t, pool, now.Add(-time.Second), nil)
	resendTestInsert(t, pool, now.Add(time.Second), nil) // not due

	claim, err := claimDue(ctx, st, "a", now, store.DueCursor{}, 2, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if claim.ID == 0 || len(claim.IDs) != 2 || claim.IDs[0] != first || claim.IDs[1] != second ||
		claim.Next.ID != second || !claim.Next.At.Equal(now.Add(-2*time.Second)) {
		t.Fatalf("claim %+v: want the two earliest due rows and the cursor after the second", claim)
	}
	// The records load in the order asked for, with null key, empty value and null header value.
	items, err := st.ResendItems(ctx, []uuid.UUID{second, first, uuid.New()})
	if err != nil || len(items) != 2 || items[0].ID != second || items[1].ID != first {
		t.Fatalf("load: %+v, %v; want second then first", items, err)
	}
	it := items[1]
	if it.Key != nil || it.Value == nil || len(it.Value) != 0 || len(it.Headers) != 1 || it.Headers[0].Value != nil ||
		it.Offset != 7 || it.CausingMessage != "cause" || it.PublisherService != "svc" || it.State != store.StateRetryPending {
		t.Fatalf("item %+v: null key, empty value and null header value must survive", it)
	}

	// Held rows are not claimed again, from any cursor, until the claim expires.
	again, err := claimDue(ctx, st, "b", now, store.DueCursor{}, 10, now.Add(time.Minute))
	if err != nil || len(again.IDs) != 1 || again.IDs[0] != third {
		t.Fatalf("second claim: %+v, %v: want only the third row", again, err)
	}
	empty, err := claimDue(ctx, st, "b", now, store.DueCursor{}, 10, now.Add(time.Minute))
	if err != nil || empty.ID != 0 || len(empty.IDs) != 0 || empty.Next != (store.DueCursor{}) {
		t.Fatalf("claim with everything held: %+v, %v; want an empty claim", empty, err)
	}
	later := now.Add(2 * time.Minute)
	expired, err := claimDue(ctx, st, "c", later, store.DueCursor{}, 10, later.Add(time.Minute))
	if err != nil || len(expired.IDs) != 4 {
		t.Fatalf("claim after the claims expired: %+v, %v; want all 4 rows", expired, err)
	}
	// That claim deleted the expired ones.
	if n := claimCount(t, pool); n != 1 {
		t.Fatalf("%d claims after the expired ones were replaced, want 1", n)
	}

	// A mark releases the owner's claims only, and marks whatever is still resendable.
	marked, err := st.MarkResent(ctx, store.MarkResentParams{Owner: "someone-else", Claims: []int64{expired.ID}, IDs: []uuid.UUID{first}, At: later})
	if err != nil || len(marked) != 1 || marked[0] != first {
		t.Fatalf("mark: %v, %v", marked, err)
	}
	if n := claimCount(t, pool); n != 1 {
		t.Fatalf("another owner's mark released the claim: %d claims", n)
	}
	marked, err = st.MarkResent(ctx, store.MarkResentParams{Owner: "c", Claims: []int64{expired.ID}, IDs: []uuid.UUID{first, second}, At: later,
		Audit: func(m []uuid.UUID) []store.AuditEntry {
			return []store.AuditEntry{{FailureID: &m[0], Action: "retry", Principal: "p", Details: map[string]any{"k": "v"}}}
		}})
	if err != nil || len(marked) != 1 || marked[0] != second {
		t.Fatalf("mark by the owner: %v, %v; want only second (first is RESENT already)", marked, err)
	}
	if n := claimCount(t, pool); n != 0 {
		t.Fatalf("%d claims after the owner's mark, want 0", n)
	}
	var action, details string
	if err := pool.QueryRow(ctx, `SELECT action, details::text FROM audit_log WHERE failure_id = $1`, second).Scan(&action, &details); err != nil ||
		action != "retry" || details != `{"k": "v"}` {
		t.Fatalf("audit: %q %q %v", action, details, err)
	}
	// Released rows that are still due are claimed at once.
	rest, err := claimDue(ctx, st, "d", later, store.DueCursor{}, 10, later.Add(time.Minute))
	if err != nil || len(rest.IDs) != 2 {
		t.Fatalf("claim after the release: %+v, %v; want the 2 rows still RETRY_PENDING", rest, err)
	}
}

// Concurrent claimers never get the same failure: claims are taken one at a time.
func TestConcurrentClaimsAreDisjoint(t *testing.T) {
	ctx, pool, st, now := resendTestStore(t)
	const n = 300
	for i := range n {
		resendTestInsert(t, pool, now.Add(-time.Duration(i%7)*time.Second), nil)
	}
	var (
		mu   sync.Mutex
		seen = map[uuid.UUID]string{}
		wg   sync.WaitGroup
		errs = make(chan error, 8)
	)
	for w := range 8 {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				// Every claimer starts from the beginning: only the claims keep them apart.
				c, err := claimDue(ctx, st, owner, now, store.DueCursor{}, 7, now.Add(time.Minute))
				if err != nil {
					errs <- err
					return
				}
				if len(c.IDs) == 0 {
					return
				}
				mu.Lock()
				for _, id := range c.IDs {
					if other, dup := seen[id]; dup {
						mu.Unlock()
						errs <- fmt.Errorf("%s claimed by %s and %s", id, other, owner)
						return
					}
					seen[id] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("%d failures claimed, want %d", len(seen), n)
	}
}

func TestClaimResendsByID(t *testing.T) {
	ctx, pool, st, now := resendTestStore(t)
	a := resendTestInsert(t, pool, now.Add(time.Hour), nil)
	b := resendTestInsert(t, pool, now.Add(time.Hour), nil)
	c := resendTestInsert(t, pool, now.Add(time.Hour), nil)
	due := resendTestInsert(t, pool, now.Add(-time.Second), nil)
	if _, err := pool.Exec(ctx, `UPDATE failures SET state = 'CLOSED', closed_reason = 'x' WHERE id = $1`, c); err != nil {
		t.Fatal(err)
	}
	// The scheduler holds the due one.
	if sc, err := claimDue(ctx, st, "sched", now, store.DueCursor{}, 10, now.Add(time.Minute)); err != nil || len(sc.IDs) != 1 {
		t.Fatalf("scheduler claim: %+v, %v", sc, err)
	}
	missing := uuid.New()
	claim, refused, err := st.ClaimResends(ctx, store.ClaimResendsParams{Owner: "m", IDs: []uuid.UUID{b, missing, c, a, due}, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if claim.ID == 0 || len(claim.Items) != 2 || claim.Items[0].ID != b || claim.Items[1].ID != a {
		t.Fatalf("claimed %+v, want b then a", claim)
	}
	if len(refused) != 2 || refused[c].State != store.StateClosed || refused[c].InProgress ||
		refused[due].State != store.StateRetryPending || !refused[due].InProgress {
		t.Fatalf("refused %+v", refused)
	}
	// Claimed again while held: in progress. A due claim skips it too.
	again, refused, err := st.ClaimResends(ctx, store.ClaimResendsParams{Owner: "n", IDs: []uuid.UUID{a}, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || again.ID != 0 || len(again.Items) != 0 || !refused[a].InProgress {
		t.Fatalf("second claim: %+v %+v %v", again, refused, err)
	}
	// A failed send keeps the state and pushes a RETRY_PENDING failure back.
	next := now.Add(10 * time.Second)
	n, err := st.RecordResendFailures(ctx, now, []store.ResendFailure{{ID: a, Error: "broker down", NextAttemptAt: next}})
	if err != nil || n != 1 {
		t.Fatalf("record: %d, %v", n, err)
	}
	var (
		state    string
		failures int
		dueAt    time.Time
	)
	if err := pool.QueryRow(ctx, `SELECT state, resend_failures, next_attempt_at FROM failures WHERE id = $1`, a).
		Scan(&state, &failures, &dueAt); err != nil {
		t.Fatal(err)
	}
	if state != "RETRY_PENDING" || failures != 1 || !dueAt.Equal(next) {
		t.Fatalf("after the failed send: %s %d %v", state, failures, dueAt)
	}
	// Releasing the claim without marking anything frees both failures.
	if _, err := st.MarkResent(ctx, store.MarkResentParams{Owner: "m", Claims: []int64{claim.ID}, At: now}); err != nil {
		t.Fatal(err)
	}
	if _, refused, err := st.ClaimResends(ctx, store.ClaimResendsParams{Owner: "n", IDs: []uuid.UUID{a, b}, Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil || len(refused) != 0 {
		t.Fatalf("claim after the release: refused %+v, %v", refused, err)
	}
}

// Concurrent manual claims of overlapping failures never claim one failure twice, and a close
// that comes while they hold it is refused: the claim lock and the claim row exclude both,
// although a claim neither locks nor writes the failures themselves.
func TestClaimResendsConcurrent(t *testing.T) {
	ctx, pool, st, _ := resendTestStore(t)
	now := time.Now() // the close below uses the store's clock
	ids := make([]uuid.UUID, 40)
	for i := range ids {
		ids[i] = resendTestInsert(t, pool, now.Add(time.Hour), nil)
	}
	var (
		mu      sync.Mutex
		claimed = map[uuid.UUID]int{}
		wg      sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			// Each worker asks for an overlapping window of the ids.
			part := ids[w*4 : w*4+8]
			claim, _, err := st.ClaimResends(ctx, store.ClaimResendsParams{Owner: fmt.Sprintf("w%d", w), IDs: part, Now: now, LeaseUntil: now.Add(time.Minute)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, it := range claim.Items {
				claimed[it.ID]++
			}
		})
	}
	wg.Wait()
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("failure %s claimed %d times", id, n)
		}
	}
	if len(claimed) != 36 {
		t.Errorf("%d failures claimed, want the 36 asked for", len(claimed))
	}
	res, err := st.CloseFailures(ctx, store.CloseRequest{IDs: ids[:1], Reason: "x", Principal: "op"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Outcome != store.CloseConflict {
		t.Fatalf("close of a claimed failure: %+v", res)
	}
}

// Claims after a cursor continue in due order (next_attempt_at, then id): rows due at the same
// instant are neither skipped nor claimed twice, and rows before the cursor are left alone.
func TestClaimDueResendsAfterCursor(t *testing.T) {
	ctx, pool, st, now := resendTestStore(t)
	first := resendTestInsert(t, pool, now.Add(-time.Minute), nil)
	for range 5 {
		resendTestInsert(t, pool, now.Add(-time.Second), nil)
	}
	var (
		cursor store.DueCursor
		seen   = map[uuid.UUID]bool{}
		order  []uuid.UUID
	)
	for {
		claim, err := claimDue(ctx, st, "a", now, cursor, 2, now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(claim.IDs) == 0 {
			break
		}
		for _, id := range claim.IDs {
			if seen[id] {
				t.Fatalf("%s claimed twice", id)
			}
			seen[id] = true
		}
		order = append(order, claim.IDs...)
		cursor = claim.Next
	}
	if len(order) != 6 || order[0] != first {
		t.Fatalf("claimed %d rows, first %s; want 6, first %s", len(order), order[0], first)
	}
	for i := 2; i < len(order); i++ {
		if order[i-1].String() >= order[i].String() {
			t.Fatalf("rows due at the same instant out of id order: %s before %s", order[i-1], order[i])
		}
	}

	// A row due before the cursor is not claimed after it; a claim from the start gets it.
	early := resendTestInsert(t, pool, now.Add(-2*time.Minute), nil)
	if c, err := claimDue(ctx, st, "a", now, cursor, 10, now.Add(time.Minute)); err != nil || len(c.IDs) != 0 {
		t.Fatalf("claim after the cursor: %d rows, %v; want none", len(c.IDs), err)
	}
	if c, err := claimDue(ctx, st, "a", now, store.DueCursor{}, 10, now.Add(time.Minute)); err != nil || len(c.IDs) != 1 || c.IDs[0] != early {
		t.Fatalf("claim from the start: %+v, %v; want only the early row", c, err)
	}
}

// One claim transaction can take several batches: consecutive claims in due order, the last one
// smaller, each its own claim row.
func TestClaimDueBatches(t *testing.T) {
	ctx, pool, st, now := resendTestStore(t)
	var want []uuid.UUID
	for i := range 7 {
		want = append(want, resendTestInsert(t, pool, now.Add(-time.Duration(10-i)*time.Second), nil))
	}
	claims, err := st.ClaimDueBatches(ctx, store.ClaimDueParams{Owner: "a", Now: now, BatchSize: 3, Batches: 4, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 3 || len(claims[0].IDs) != 3 || len(claims[1].IDs) != 3 || len(claims[2].IDs) != 1 {
		t.Fatalf("claims %+v: want batches of 3, 3 and 1", claims)
	}
	var got []uuid.UUID
	ids := map[int64]bool{}
	for _, c := range claims {
		got = append(got, c.IDs...)
		ids[c.ID] = true
		if c.Next.ID != c.IDs[len(c.IDs)-1] {
			t.Fatalf("claim %+v: its cursor is not after its last failure", c)
		}
	}
	if len(ids) != 3 || claimCount(t, pool) != 3 {
		t.Fatalf("%d claim ids, %d claim rows; want 3 each", len(ids), claimCount(t, pool))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("claimed %v, want %v (due order)", got, want)
		}
	}
	if _, err := st.ClaimDueBatches(ctx, store.ClaimDueParams{Owner: "a", Now: now, BatchSize: 0, Batches: 4, LeaseUntil: now.Add(time.Minute)}); err == nil {
		t.Fatal("a batch size of 0 was accepted")
	}
	if more, err := st.ClaimDueBatches(ctx, store.ClaimDueParams{Owner: "b", Now: now, BatchSize: 3, Batches: 4, LeaseUntil: now.Add(time.Minute)}); err != nil || len(more) != 0 {
		t.Fatalf("second claim: %+v, %v; want none (all held)", more, err)
	}
}

// claimDue claims up to limit due failures after the cursor as one claim: ClaimDueBatches for
// one batch. The claim is empty (ID 0, Next = after) when nothing is due.
func claimDue(ctx context.Context, st *store.Store, owner string, now time.Time, after store.DueCursor, limit int, leaseUntil time.Time) (store.DueClaim, error) {
	claims, err := st.ClaimDueBatches(ctx, store.ClaimDueParams{Owner: owner, Now: now, After: after, BatchSize: limit, Batches: 1, LeaseUntil: leaseUntil})
	if err != nil || len(claims) == 0 {
		return store.DueClaim{Next: after}, err
	}
	return claims[0], nil
}

// A due claim carries each failure's created_at, and the load and the marks that are given it
// find each failure in its own partition, and only there.
func TestResendByIDAndCreatedAt(t *testing.T) {
	ctx, pool, st, now := resendTestStore(t)
	a := resendTestInsert(t, pool, now.Add(-2*time.Second), nil)
	b := resendTestInsert(t, pool, now.Add(-time.Second), nil)
	// b lives in another partition (the default one, of times before every period).
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `UPDATE failures SET created_at = $2 WHERE id = $1`, b, old); err != nil {
		t.Fatal(err)
	}
	var aAt time.Time
	if err := pool.QueryRow(ctx, `SELECT created_at FROM failure_states WHERE id = $1`, a).Scan(&aAt); err != nil {
		t.Fatal(err)
	}
	claim, err := claimDue(ctx, st, "c", now, store.DueCursor{}, 10, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(claim.IDs) != 2 || claim.IDs[0] != a || claim.IDs[1] != b || len(claim.CreatedAt) != 2 ||
		!claim.CreatedAt[0].Equal(aAt) || !claim.CreatedAt[1].Equal(old) {
		t.Fatalf("claim %+v: want a (created %v) then b (created %v)", claim, aAt, old)
	}
	items, err := st.ResendItemsAt(ctx, claim.IDs, claim.CreatedAt)
	if err != nil || len(items) != 2 || items[0].ID != a || items[1].ID != b || !items[1].CreatedAt.Equal(old) {
		t.Fatalf("load: %+v, %v; want a then b with their created_at", items, err)
	}
	if items, err := st.ResendItemsAt(ctx, claim.IDs, []time.Time{aAt, aAt}); err != nil || len(items) != 1 || items[0].ID != a {
		t.Fatalf("load with b's created_at wrong: %+v, %v; want a alone", items, err)
	}
	if _, err := st.ResendItemsAt(ctx, claim.IDs, []time.Time{aAt}); err == nil {
		t.Fatal("load with fewer created_at than ids succeeded")
	}
	n, err := st.RecordResendFailures(ctx, now, []store.ResendFailure{
		{ID: a, CreatedAt: old, Error: "x", NextAttemptAt: now}, {ID: b, CreatedAt: old, Error: "x", NextAttemptAt: now}})
	if err != nil || n != 1 {
		t.Fatalf("record resend failures: %d rows, %v; want b's alone", n, err)
	}
	marked, err := st.MarkResent(ctx, store.MarkResentParams{Owner: "c", IDs: claim.IDs, CreatedAt: []time.Time{old, old}, At: now})
	if err != nil || len(marked) != 1 || marked[0] != b {
		t.Fatalf("mark with a's created_at wrong: %v, %v; want b alone", marked, err)
	}
	if _, err := st.MarkResent(ctx, store.MarkResentParams{Owner: "c", IDs: claim.IDs, CreatedAt: []time.Time{old}, At: now}); err == nil {
		t.Fatal("mark with fewer created_at than ids succeeded")
	}
	marked, err = st.MarkResent(ctx, store.MarkResentParams{Owner: "c", Claims: []int64{claim.ID}, IDs: claim.IDs, CreatedAt: claim.CreatedAt, At: now,
		Audit: func([]uuid.UUID) []store.AuditEntry { return nil }})
	if err != nil || len(marked) != 1 || marked[0] != a {
		t.Fatalf("mark with the claim's created_at: %v, %v; want a (b is RESENT already)", marked, err)
	}
	if n := claimCount(t, pool); n != 0 {
		t.Fatalf("%d claims left; want the claim released", n)
	}
}
