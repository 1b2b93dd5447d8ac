package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/migrations"
)

// migrateTo applies the migrations up to version and returns the provider.
func migrateTo(t *testing.T, db *sql.DB, version int64) *goose.Provider {
	t.Helper()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return p
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var ok bool
	if err := db.QueryRow("SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestCheckOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	db := testkit.EmptyPostgres(t).OpenSQL(t)
	err := migrations.Check(context.Background(), db)
	if !errors.Is(err, migrations.ErrNotMigrated) {
		t.Fatalf("Check on an empty database = %v, want ErrNotMigrated", err)
	}
	if !strings.Contains(err.Error(), "redrive migrate") {
		t.Errorf("Check error %q does not say what to run", err)
	}
	if tableExists(t, db, "goose_db_version") {
		t.Error("Check created goose's version table: it must only read")
	}
	if v, err := migrations.Version(context.Background(), db); err != nil || v != 0 {
		t.Errorf("Version = %d, %v; want 0, nil", v, err)
	}
}

func TestUpTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.EmptyPostgres(t).OpenSQL(t)
	for i := 0; i < 2; i++ {
		if err := migrations.Up(ctx, db); err != nil {
			t.Fatalf("Up #%d: %v", i+1, err)
		}
	}
	if err := migrations.Check(ctx, db); err != nil {
		t.Fatalf("Check after Up: %v", err)
	}
	v, err := migrations.Version(ctx, db)
	if err != nil || v != migrations.Latest() {
		t.Fatalf("Version = %d, %v; want %d", v, err, migrations.Latest())
	}
	for _, table := range []string{"failures", "failure_groups", "audit_log"} {
		if !tableExists(t, db, table) {
			t.Errorf("table %s missing after Up", table)
		}
	}
	var reason sql.NullString
	if err := db.QueryRow("SELECT state_reason FROM failures LIMIT 1").Scan(&reason); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("failures.state_reason (migration 002): %v", err)
	}
}

func TestUpConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tdb := testkit.EmptyPostgres(t)
	const n = 4
	dbs := make([]*sql.DB, n)
	for i := range dbs {
		dbs[i] = tdb.OpenSQL(t) // one pool per "instance"
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = migrations.Up(ctx, dbs[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: Up: %v", i, err)
		}
	}
	if err := migrations.Check(ctx, dbs[0]); err != nil {
		t.Fatalf("Check: %v", err)
	}
	var applied, distinct int
	if err := dbs[0].QueryRow("SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0").Scan(&applied, &distinct); err != nil {
		t.Fatal(err)
	}
	if files := len(sqlFiles(t)); applied != files || distinct != applied {
		t.Errorf("goose_db_version holds %d rows for %d versions, want %d each (one per file)", applied, distinct, files)
	}
}

func TestCheckOlderAndNewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.EmptyPostgres(t).OpenSQL(t)

	// Apply only the first migration, as an older redrive would have.
	migrateTo(t, db, 1)
	if migrations.Latest() > 1 {
		err := migrations.Check(ctx, db)
		if !errors.Is(err, migrations.ErrNotMigrated) || !strings.Contains(err.Error(), "version 1") {
			t.Errorf("Check at version 1 = %v, want ErrNotMigrated naming version 1", err)
		}
	}

	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	// A newer redrive applied a migration this binary does not know.
	if _, err := db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)", migrations.Latest()+1); err != nil {
		t.Fatal(err)
	}
	err := migrations.Check(ctx, db)
	if !errors.Is(err, migrations.ErrSchemaNewer) {
		t.Fatalf("Check on a newer schema = %v, want ErrSchemaNewer", err)
	}
	// Up has nothing to apply and changes nothing; Check still says newer.
	if err := migrations.Up(ctx, db); err != nil {
		t.Errorf("Up on a newer schema: %v", err)
	}
	if err := migrations.Check(ctx, db); !errors.Is(err, migrations.ErrSchemaNewer) {
		t.Errorf("Check after Up on a newer schema = %v, want ErrSchemaNewer", err)
	}
}

func TestLatestMatchesFiles(t *testing.T) {
	t.Parallel()
	var newest int64
	seen := map[int64]string{}
	for _, name := range sqlFiles(t) {
		var v int64
		if _, err := fmt.Sscanf(name, "%d_", &v); err != nil || v <= 0 {
			t.Fatalf("%s: not a numbered migration (NNN_name.sql)", name)
		}
		if other, ok := seen[v]; ok {
			t.Errorf("%s and %s share the number %d", name, other, v)
		}
		seen[v] = name
		newest = max(newest, v)
	}
	if migrations.Latest() != newest {
		t.Errorf("Latest() = %d, want %d (the newest file)", migrations.Latest(), newest)
	}
}

// sqlFiles returns the names of the migration files.
func sqlFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, e.Name())
		}
	}
	return names
}

// Migration 006 turns the leases of an older version that are still running into claims, and
// its down migration turns live claims back into leases.
func TestResendClaimsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.EmptyPostgres(t).OpenSQL(t)
	p := migrateTo(t, db, 5)
	insert := func(owner *string, until string) string {
		t.Helper()
		var id string
		err := db.QueryRow(`
			WITH g AS (
				INSERT INTO failure_groups (publisher_service, error_code) VALUES ('svc', 'E')
				ON CONFLICT ON CONSTRAINT failure_groups_kind_key DO UPDATE SET last_seen = now()
				RETURNING id)
			INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id,
				event_created, publisher_system, publisher_service, original_topic, original_partition,
				original_offset, original_key, original_value, header_names, header_values, causing_message,
				next_attempt_at, group_id, lease_owner, lease_until)
			SELECT 'RETRY_PENDING', 'TEMPORARY', 'E', 'boom', gen_random_uuid()::text, gen_random_uuid()::text,
				now(), 'sys', 'svc', 't', 0, 1, NULL, ''::bytea, '{}', '{}', 'cause', now(), g.id,
				$1, now() + $2::interval
			FROM g RETURNING id`, owner, until).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	a, b := "instance-a", "instance-b"
	liveA1, liveA2 := insert(&a, "1 minute"), insert(&a, "2 minutes")
	expiredB := insert(&b, "-1 minute")
	insert(nil, "0") // never leased

	if _, err := p.UpTo(ctx, 6); err != nil {
		t.Fatalf("up to 6: %v", err)
	}
	var (
		owner, list string
		n           int
	)
	if err := db.QueryRow(`SELECT count(*) FROM resend_claims`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d claims after the migration (%v), want 1 (the expired lease is not carried over)", n, err)
	}
	if err := db.QueryRow(`SELECT owner, array_to_string(failure_ids, ',') FROM resend_claims`).Scan(&owner, &list); err != nil {
		t.Fatal(err)
	}
	ids := strings.Split(list, ",")
	if owner != a || len(ids) != 2 || !(ids[0] == liveA1 && ids[1] == liveA2 || ids[0] == liveA2 && ids[1] == liveA1) {
		t.Fatalf("claim of %q over %v, want %s over %s and %s", owner, ids, a, liveA1, liveA2)
	}
	var cols int
	if err := db.QueryRow(`SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'failures' AND column_name IN ('lease_owner', 'lease_until')`).Scan(&cols); err != nil || cols != 0 {
		t.Fatalf("%d lease columns left (%v)", cols, err)
	}

	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatalf("down to 5: %v", err)
	}
	if tableExists(t, db, "resend_claims") {
		t.Fatal("resend_claims still exists after the down migration")
	}
	if err := db.QueryRow(`SELECT count(*) FROM failures WHERE lease_owner = $1 AND lease_until > now()`, a).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d live leases of %s after the down migration (%v), want 2", n, a, err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM failures WHERE lease_owner IS NOT NULL AND id NOT IN ($1, $2)`,
		liveA1, liveA2).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d other failures leased after the down migration (%v), want 0 (%s's lease had expired)", n, err, expiredB)
	}
}
