package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

const week = 7 * 24 * time.Hour

// createPeriod creates the partitions of the week that starts at from, as housekeeping did when
// that week was ahead.
func createPeriod(t *testing.T, pool *pgxpool.Pool, from time.Time) {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT redrive_create_partitions($1, $2)`, from, from.Add(week)).Scan(&ok); err != nil || !ok {
		t.Fatalf("create partitions from %s: %v, %v", from, ok, err)
	}
}

// snapshot returns every column of the failure with id as text, and the partition of its record.
func snapshot(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) (row, partition string) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `
		SELECT (SELECT row_to_json(f)::text FROM failures f WHERE f.id = $1),
		       (SELECT r.tableoid::regclass::text FROM failure_records r WHERE r.id = $1)`, id).Scan(&row, &partition)
	if err != nil {
		t.Fatalf("snapshot %s: %v", id, err)
	}
	return row, partition
}

// Retention drops whole partitions; the failures of a dropped partition that have not expired
// (open ones, and ones resolved too recently) are carried into the default partition
// unchanged; the expired ones go with their keys, revisions and empty groups; the audit log
// stays; a partition with more survivors than MaxCarry waits.
func TestDropExpiredPartitionsCarriesOpenFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testkit.Postgres(t)
	now := time.Now().UTC()
	clock := now
	s, err := store.New(store.Config{Pool: pool, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	const day = 24 * time.Hour
	old := time.Unix(now.Add(-60*day).Unix()/int64(week/time.Second)*int64(week/time.Second), 0).UTC()
	older := old.Add(-week)
	createPeriod(t, pool, older)
	createPeriod(t, pool, old)

	// Ingests one failure per name at created_at, with a stack trace shared by all.
	put := func(at time.Time, service string, names ...string) map[string]uuid.UUID {
		clock = at
		defer func() { clock = now }()
		var batch []store.Incoming
		for _, n := range names {
			e := intakeEvent(n, avro.Permanent)
			e.Publisher.Service = service
			e.Payload.StackTrace = avro.Ptr("java.lang.IllegalStateException: boom\n\tat Orders.handle(Orders.java:42)\n")
			batch = append(batch, incoming(t, e))
		}
		res := ingest(t, s, batch...)
		ids := map[string]uuid.UUID{}
		for i, n := range names {
			ids[n] = res.Outcomes[i].ID
		}
		return ids
	}
	ids := put(old.Add(day), "billing", "resent-old", "closed-old", "permanent-old", "permanent-recent", "pending", "resent-recent")
	for n, id := range put(old.Add(2*day), "gone", "gone-1", "gone-2") {
		ids[n] = id
	}
	// The older week holds four failures that are still open: more than MaxCarry below.
	for n, id := range put(older.Add(day), "billing", "older-1", "older-2", "older-3", "older-4") {
		ids[n] = id
	}
	set := func(name, sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE failure_states SET `+sql+` WHERE id = $1`, append([]any{ids[name]}, args...)...); err != nil {
			t.Fatalf("set %s: %v", name, err)
		}
	}
	set("resent-old", `state = 'RESENT', resent_at = $2, updated_at = $2`, now.Add(-40*day))
	set("closed-old", `state = 'CLOSED', closed_reason = 'x', closed_by = 'x', closed_at = $2, updated_at = $2`, now.Add(-40*day))
	set("permanent-old", `updated_at = $2`, now.Add(-200*day))
	set("permanent-recent", `updated_at = $2`, now.Add(-3*day))
	set("pending", `state = 'RETRY_PENDING', next_attempt_at = $2`, now.Add(time.Hour))
	set("resent-recent", `state = 'RESENT', resent_at = $2, updated_at = $2`, now.Add(-2*day))
	set("gone-1", `state = 'RESENT', resent_at = $2, updated_at = $2`, now.Add(-50*day))
	set("gone-2", `state = 'RESENT', resent_at = $2, updated_at = $2`, now.Add(-50*day))
	for _, n := range []string{"resent-old", "resent-recent"} {
		if err := s.CreateRevision(ctx, &store.Revision{FailureID: ids[n], Principal: "p", Reason: "r", TargetTopic: "orders", Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (failure_id, action, principal) VALUES ($1, 'close', 'dave')`, ids["closed-old"]); err != nil {
		t.Fatal(err)
	}
	survivors := []string{"permanent-recent", "pending", "resent-recent"}
	before := map[string]string{}
	for _, n := range survivors {
		before[n], _ = snapshot(t, pool, ids[n])
	}

	dropped, err := s.DropExpiredPartitions(ctx, store.RetentionParams{Now: now, ResolvedAge: 30 * day, PermanentAge: 180 * day, MaxCarry: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || !dropped[0].From.Equal(old) || dropped[0].Dropped != 5 || dropped[0].Carried != 3 || dropped[0].Groups != 1 {
		t.Fatalf("dropped %+v, want the week of %s with 5 dropped, 3 carried, 1 group", dropped, old)
	}
	parts, err := s.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if p.From.Equal(old) {
			t.Errorf("partition %s still attached", p.Name)
		}
	}
	if len(parts) == 0 || !parts[0].From.Equal(older) {
		t.Errorf("partitions %+v: the older week (4 open failures, MaxCarry 3) must wait", parts)
	}
	for _, n := range survivors {
		after, partition := snapshot(t, pool, ids[n])
		if after != before[n] {
			t.Errorf("%s changed when carried:\n before %s\n after  %s", n, before[n], after)
		}
		if partition != "failure_records_default" {
			t.Errorf("%s is in %s, want the default partition", n, partition)
		}
	}
	notResentExact(t, pool, "after the drop")
	for _, n := range []string{"resent-old", "closed-old", "permanent-old", "gone-1", "gone-2"} {
		if _, err := s.FailureByID(ctx, ids[n]); err != store.ErrNotFound {
			t.Errorf("expired %s: FailureByID = %v, want ErrNotFound", n, err)
		}
	}
	for q, want := range map[string]int{
		`SELECT count(*) FROM failure_keys`:                                                                 7,
		`SELECT count(*) FROM failure_revisions`:                                                            1,
		`SELECT count(*) FROM failure_groups WHERE publisher_service = 'gone'`:                              0,
		`SELECT count(*) FROM audit_log`:                                                                    3, // the close and two repairs
		`SELECT count(*) FROM failure_texts`:                                                                1,
		fmt.Sprintf(`SELECT count(*) FROM failure_revisions WHERE failure_id = '%s'`, ids["resent-recent"]): 1,
	} {
		if n := countRows(t, pool, q); n != want {
			t.Errorf("%s = %d, want %d", q, n, want)
		}
	}
	// A carried failure is still found by its idempotence id; an expired one is new again.
	clock = now
	res := ingest(t, s, incoming(t, intakeEvent("pending", avro.Permanent)), incoming(t, intakeEvent("gone-1", avro.Permanent)))
	if !res.Outcomes[0].Duplicate || res.Outcomes[0].ID != ids["pending"] || res.Outcomes[1].Duplicate {
		t.Errorf("re-ingest: %+v, want the carried one a duplicate, the dropped one new", res.Outcomes)
	}
	// The carried failures still act: the open one closes, and expires from the default
	// partition row by row.
	if err := s.CloseFailure(ctx, ids["permanent-recent"], "p", "done"); err != nil {
		t.Fatal(err)
	}
	if n, _, err := s.DeleteExpired(ctx, store.StateClosed, now.Add(time.Minute), 10); err != nil || n != 1 {
		t.Errorf("DeleteExpired of the carried, closed failure = %d, %v; want 1", n, err)
	}
	notResentExact(t, pool, "after the delete from the default partition")

	// Without a limit, the older week goes too, its open failures carried.
	dropped, err = s.DropExpiredPartitions(ctx, store.RetentionParams{Now: now, ResolvedAge: 30 * day, PermanentAge: 180 * day})
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || !dropped[0].From.Equal(older) || dropped[0].Carried != 4 || dropped[0].Dropped != 0 {
		t.Fatalf("second run dropped %+v, want the older week with 4 carried", dropped)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM failures WHERE state = 'PERMANENT'`); n != 5 {
		t.Errorf("%d PERMANENT failures, want 5 (older-1..4 and the re-ingested gone-1)", n)
	}
	notResentExact(t, pool, "after the second drop")
}

// notResentExact fails t unless failure_not_resent holds exactly the failures that are not
// RESENT, with their columns (migration 026): retention detaches partitions and deletes from
// the default one, which fire no trigger of failure_states.
func notResentExact(t *testing.T, pool *pgxpool.Pool, when string) {
	t.Helper()
	const q = `SELECT count(*) FROM (
		(SELECT id, created_at, group_id, temporality, original_topic, state, next_attempt_at FROM failure_not_resent
		 EXCEPT ALL
		 SELECT id, created_at, group_id, temporality, original_topic, state, next_attempt_at FROM failure_states WHERE state <> 'RESENT')
		UNION ALL
		(SELECT id, created_at, group_id, temporality, original_topic, state, next_attempt_at FROM failure_states WHERE state <> 'RESENT'
		 EXCEPT ALL
		 SELECT id, created_at, group_id, temporality, original_topic, state, next_attempt_at FROM failure_not_resent)) d`
	if n := countRows(t, pool, q); n != 0 {
		t.Errorf("%s: failure_not_resent differs from the states in %d rows", when, n)
	}
}

// EnsurePartitions creates the periods ahead (from the one of now, never behind it), once each,
// and leaves a period whose rows sit in the default partition alone.
func TestEnsurePartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsurePartitions(ctx, store.EnsurePartitionsParams{Now: time.Now(), Width: 36 * time.Hour}); err == nil {
		t.Error("a width of 36h was accepted")
	}
	parts, err := s.Partitions(ctx)
	if err != nil || len(parts) == 0 {
		t.Fatalf("partitions after the migration: %v, %v", parts, err)
	}
	newest := parts[len(parts)-1].To
	// A failure far ahead of the newest period lands in the default partition.
	far := newest.Add(10 * week)
	testkit.InsertFailure(t, pool, testkit.FailureRow{CreatedAt: far})
	res, err := s.EnsurePartitions(ctx, store.EnsurePartitionsParams{Now: far, Width: week, Ahead: week})
	if err != nil {
		t.Fatal(err)
	}
	// The weeks between stay uncovered (their rows, if any, go to the default partition); the
	// far failure's week is skipped, the next one created.
	if len(res.Created) != 1 || len(res.Skipped) != 1 || far.Before(res.Skipped[0].From) || !far.Before(res.Skipped[0].To) ||
		!res.Created[0].From.Equal(res.Skipped[0].To) {
		t.Fatalf("created %+v, skipped %+v; want the far failure's week skipped and the next one created", res.Created, res.Skipped)
	}
	again, err := s.EnsurePartitions(ctx, store.EnsurePartitionsParams{Now: far, Width: week, Ahead: week})
	if err != nil || len(again.Created) != 0 {
		t.Errorf("second run created %d (%v), want none", len(again.Created), err)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM failures`); n != 1 {
		t.Errorf("%d failures, want 1", n)
	}
}

// A retention that stopped after detaching a period (and carrying its survivors) is finished
// by the next run: the keys of the period's failures go, then its tables.
func TestDropExpiredPartitionsFinishesADetachedPeriod(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testkit.Postgres(t)
	now := time.Now().UTC()
	clock := now
	s, err := store.New(store.Config{Pool: pool, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	from := time.Unix(now.Add(-90*24*time.Hour).Unix()/int64(week/time.Second)*int64(week/time.Second), 0).UTC()
	createPeriod(t, pool, from)
	clock = from.Add(time.Hour)
	ingest(t, s, incoming(t, intakeEvent("detached-1", avro.Permanent)), incoming(t, intakeEvent("detached-2", avro.Permanent)))
	clock = now
	name := "p" + from.Format("20060102")
	for _, q := range []string{
		`UPDATE failure_states SET state = 'RESENT', resent_at = now() - interval '80 days', updated_at = now() - interval '80 days'`,
		`ALTER TABLE failure_records DETACH PARTITION failure_records_` + name,
		`ALTER TABLE failure_states DETACH PARTITION failure_states_` + name,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dropped, err := s.DropExpiredPartitions(ctx, store.RetentionParams{Now: now, ResolvedAge: 30 * 24 * time.Hour, PermanentAge: 180 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || dropped[0].Name != name || dropped[0].Dropped != 2 {
		t.Fatalf("dropped %+v, want the detached %s with its 2 failures", dropped, name)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM pg_class WHERE relname IN ($1, $2)`, "failure_records_"+name, "failure_states_"+name); n != 0 {
		t.Errorf("%d tables of the detached period left", n)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM failure_keys`); n != 0 {
		t.Errorf("%d keys left, want 0", n)
	}
}
