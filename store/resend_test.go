package store_test

import (
	"context"
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

func TestClaimDueResendsSkipsLockedAndLeased(t *testing.T) {
	ctx := context.Background()
	pool := testkit.Postgres(t)
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	locked := resendTestInsert(t, pool, now.Add(-3*time.Second), nil)
	first := resendTestInsert(t, pool, now.Add(-2*time.Second), map[string][]byte{"h": nil})
	second := resendTestInsert(t, pool, now.Add(-time.Second), nil)
	resendTestInsert(t, pool, now.Add(time.Second), nil) // not due

	// Another transaction holds a row (as a concurrent claim does): it is skipped, not waited for.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM failures WHERE id = $1 FOR UPDATE`, locked); err != nil {
		t.Fatal(err)
	}
	items, err := st.ClaimDueResends(ctx, "a", now, 10, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].ID != first || items[1].ID != second {
		t.Fatalf("claimed %+v, want the two unlocked due rows, earliest first", items)
	}
	it := items[0]
	if it.Key != nil || it.Value == nil || len(it.Value) != 0 || len(it.Headers) != 1 || it.Headers[0].Value != nil ||
		it.Offset != 7 || it.CausingMessage != "cause" || it.PublisherService != "svc" {
		t.Fatalf("item %+v: null key, empty value and null header value must survive", it)
	}
	_ = tx.Rollback(ctx)

	// Leased rows are not claimed again until their lease expires.
	items, err = st.ClaimDueResends(ctx, "b", now, 10, now.Add(time.Minute))
	if err != nil || len(items) != 1 || items[0].ID != locked {
		t.Fatalf("second claim: %+v, %v: want only the formerly locked row", items, err)
	}
	items, err = st.ClaimDueResends(ctx, "c", now.Add(2*time.Minute), 10, now.Add(3*time.Minute))
	if err != nil || len(items) != 4 {
		t.Fatalf("claim after the leases expired: %d rows, %v; want 4", len(items), err)
	}

	// Only the lease owner marks.
	marked, err := st.MarkResent(ctx, "a", []uuid.UUID{first, second}, now, nil)
	if err != nil || len(marked) != 0 {
		t.Fatalf("mark by a former owner: %v, %v", marked, err)
	}
	marked, err = st.MarkResent(ctx, "c", []uuid.UUID{first}, now, func(m []uuid.UUID) []store.AuditEntry {
		return []store.AuditEntry{{FailureID: &m[0], Action: "retry", Principal: "p", Details: map[string]any{"k": "v"}}}
	})
	if err != nil || len(marked) != 1 || marked[0] != first {
		t.Fatalf("mark by the owner: %v, %v", marked, err)
	}
	var action, details string
	if err := pool.QueryRow(ctx, `SELECT action, details::text FROM audit_log WHERE failure_id = $1`, first).Scan(&action, &details); err != nil ||
		action != "retry" || details != `{"k": "v"}` {
		t.Fatalf("audit: %q %q %v", action, details, err)
	}
}

func TestClaimResendsByID(t *testing.T) {
	ctx := context.Background()
	pool := testkit.Postgres(t)
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	a := resendTestInsert(t, pool, now.Add(time.Hour), nil)
	b := resendTestInsert(t, pool, now.Add(time.Hour), nil)
	c := resendTestInsert(t, pool, now.Add(time.Hour), nil)
	if _, err := pool.Exec(ctx, `UPDATE failures SET state = 'CLOSED', closed_reason = 'x' WHERE id = $1`, c); err != nil {
		t.Fatal(err)
	}
	missing := uuid.New()
	claimed, refused, err := st.ClaimResends(ctx, "m", []uuid.UUID{b, missing, c, a}, now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 2 || claimed[0].ID != b || claimed[1].ID != a {
		t.Fatalf("claimed %+v, want b then a", claimed)
	}
	if len(refused) != 1 || refused[c].State != store.StateClosed || refused[c].InProgress {
		t.Fatalf("refused %+v", refused)
	}
	// Claimed again while leased: in progress.
	claimed, refused, err = st.ClaimResends(ctx, "n", []uuid.UUID{a}, now, now.Add(time.Minute))
	if err != nil || len(claimed) != 0 || !refused[a].InProgress {
		t.Fatalf("second claim: %+v %+v %v", claimed, refused, err)
	}
	// A failed send keeps the state and pushes a RETRY_PENDING failure back.
	next := now.Add(10 * time.Second)
	n, err := st.RecordResendFailures(ctx, "m", now, []store.ResendFailure{{ID: a, Error: "broker down", NextAttemptAt: next}})
	if err != nil || n != 1 {
		t.Fatalf("record: %d, %v", n, err)
	}
	var (
		state    string
		failures int
		due      time.Time
		owner    *string
	)
	if err := pool.QueryRow(ctx, `SELECT state, resend_failures, next_attempt_at, lease_owner FROM failures WHERE id = $1`, a).
		Scan(&state, &failures, &due, &owner); err != nil {
		t.Fatal(err)
	}
	if state != "RETRY_PENDING" || failures != 1 || !due.Equal(next) || owner != nil {
		t.Fatalf("after the failed send: %s %d %v %v", state, failures, due, owner)
	}
}

// Claims after a cursor continue in due order (next_attempt_at, then id): rows due at the same
// instant are neither skipped nor claimed twice, and rows before the cursor are left alone.
func TestClaimDueResendsAfterCursor(t *testing.T) {
	ctx := context.Background()
	pool := testkit.Postgres(t)
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	first := resendTestInsert(t, pool, now.Add(-time.Minute), nil)
	for range 5 {
		resendTestInsert(t, pool, now.Add(-time.Second), nil)
	}
	var (
		cursor store.DueCursor
		seen   = map[uuid.UUID]bool{}
		order  []store.ResendItem
	)
	for {
		items, err := st.ClaimDueResendsAfter(ctx, "a", now, cursor, 2, now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(items) == 0 {
			break
		}
		for _, it := range items {
			if seen[it.ID] {
				t.Fatalf("%s claimed twice", it.ID)
			}
			seen[it.ID] = true
		}
		order = append(order, items...)
		cursor = cursor.After(items)
	}
	if len(order) != 6 || order[0].ID != first {
		t.Fatalf("claimed %d rows, first %s; want 6, first %s", len(order), order[0].ID, first)
	}
	for i := 2; i < len(order); i++ {
		if order[i-1].ID.String() >= order[i].ID.String() {
			t.Fatalf("rows due at the same instant out of id order: %s before %s", order[i-1].ID, order[i].ID)
		}
	}

	// A row due before the cursor is not claimed after it; a claim from the start gets it.
	early := resendTestInsert(t, pool, now.Add(-2*time.Minute), nil)
	if items, err := st.ClaimDueResendsAfter(ctx, "a", now, cursor, 10, now.Add(time.Minute)); err != nil || len(items) != 0 {
		t.Fatalf("claim after the cursor: %d rows, %v; want none", len(items), err)
	}
	if items, err := st.ClaimDueResendsAfter(ctx, "a", now, store.DueCursor{}, 10, now.Add(time.Minute)); err != nil || len(items) != 1 || items[0].ID != early {
		t.Fatalf("claim from the start: %+v, %v; want only the early row", items, err)
	}
}
