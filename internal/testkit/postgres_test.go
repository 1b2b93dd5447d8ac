package testkit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/migrations"
)

func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testkit.DatabaseURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatalf("query pg_database: %v", err)
	}
	return n > 0
}

func hasTable(t *testing.T, db *testkit.DB, table string) bool {
	t.Helper()
	var ok bool
	err := db.Pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok)
	if err != nil {
		t.Fatalf("to_regclass(%s): %v", table, err)
	}
	return ok
}

func TestPostgresGivesSeparateMigratedDatabases(t *testing.T) {
	t.Parallel()
	var names []string
	t.Run("use", func(t *testing.T) {
		ctx := context.Background()
		a, b := testkit.PostgresDB(t), testkit.PostgresDB(t)
		if a.Name == b.Name || a.DSN == b.DSN {
			t.Fatalf("two calls gave the same database %q", a.Name)
		}
		names = append(names, a.Name, b.Name)
		for _, db := range []*testkit.DB{a, b} {
			if !hasTable(t, db, "goose_db_version") {
				t.Errorf("%s: migrations not applied", db.Name)
			}
			if err := migrations.Check(ctx, db.OpenSQL(t)); err != nil {
				t.Errorf("%s: migrations.Check: %v", db.Name, err)
			}
		}
		if _, err := a.Pool.Exec(ctx, "CREATE TABLE only_in_a (id int)"); err != nil {
			t.Fatalf("create table: %v", err)
		}
		if hasTable(t, b, "only_in_a") {
			t.Errorf("a table created in %s is visible in %s", a.Name, b.Name)
		}
		// The DSN reaches the same database as the pool.
		conn, err := pgx.Connect(ctx, a.DSN)
		if err != nil {
			t.Fatalf("connect to DSN: %v", err)
		}
		defer conn.Close(ctx)
		var current string
		if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&current); err != nil || current != a.Name {
			t.Fatalf("DSN reaches %q (err %v), want %q", current, err, a.Name)
		}
		// Postgres is the short form.
		if err := testkit.Postgres(t).Ping(ctx); err != nil {
			t.Fatalf("ping: %v", err)
		}
	})
	for _, name := range names {
		if databaseExists(t, name) {
			t.Errorf("database %s still exists after its test ended", name)
		}
	}
}

func TestEmptyPostgresHasNoSchemaAndMigrates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.EmptyPostgres(t)
	if hasTable(t, db, "goose_db_version") {
		t.Fatal("EmptyPostgres returned a migrated database")
	}
	// migrations.Up closes the handle it is given (goose's Provider.Close
	// does), so Check gets a handle of its own.
	if err := migrations.Up(ctx, db.OpenSQL(t)); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	if err := migrations.Check(ctx, db.OpenSQL(t)); err != nil {
		t.Fatalf("migrations.Check after Up: %v", err)
	}
}

// Parallel tests copy the template at the same time.
func TestPostgresParallel(t *testing.T) {
	t.Parallel()
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			pool := testkit.Postgres(t)
			if _, err := pool.Exec(context.Background(), "CREATE TABLE t (id int)"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
