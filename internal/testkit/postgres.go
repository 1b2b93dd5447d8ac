package testkit

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/redrive/redrive/migrations"
)

// DefaultDatabaseURL is the server used when TEST_DATABASE_URL is unset.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

const (
	// templateVersion is part of the template hash; bump it when the way
	// templates are built changes.
	templateVersion = "testkit-template-v1"
	// templateLockKey is the advisory lock taken while a template is built.
	templateLockKey = int64(0x7265647269766500) // "redrive\x00"
	// setupTimeout bounds each administrative step (create, migrate, drop).
	setupTimeout = 2 * time.Minute
)

// DB is a fresh PostgreSQL database that exists for one test.
type DB struct {
	// Name is the database name, unique on the server.
	Name string
	// DSN is a connection string (URL or keyword/value, as configured) for
	// the database, for code that opens its own connections.
	DSN string
	// Pool is a pool connected to the database, closed by t.Cleanup.
	Pool *pgxpool.Pool
}

// Postgres returns a pool on a fresh database with the project migrations
// applied. The database is dropped when the test ends. Use [PostgresDB] when
// the connection string is needed too.
func Postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PostgresDB(t).Pool
}

// PostgresDB returns a fresh database with the project migrations applied.
// The pool is closed and the database dropped when the test ends.
func PostgresDB(t testing.TB) *DB {
	t.Helper()
	tmpl, err := migratedTemplate()
	if err != nil {
		t.Fatalf("testkit: prepare migrated template database: %v", err)
	}
	return newDB(t, tmpl)
}

// EmptyPostgres returns a fresh database without migrations, for tests of
// the migrations themselves. The pool is closed and the database dropped
// when the test ends.
func EmptyPostgres(t testing.TB) *DB {
	t.Helper()
	return newDB(t, "template0")
}

// OpenSQL opens a database/sql handle on the database through pgx's stdlib
// driver (as migrations.Up wants one), closed by t.Cleanup. migrations.Up
// closes the handle it is given: open another one for later use.
func (d *DB) OpenSQL(t testing.TB) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(d.DSN)
	if err != nil {
		t.Fatalf("testkit: parse DSN of %s: %v", d.Name, err)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// DatabaseURL returns the connection string of the server's maintenance
// database that testkit connects to: TEST_DATABASE_URL, or
// [DefaultDatabaseURL] when it is unset.
func DatabaseURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultDatabaseURL
}

// withDatabase returns the configured connection string pointed at dbname.
func withDatabase(base, dbname string) (string, error) {
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			return "", fmt.Errorf("parse TEST_DATABASE_URL: %w", err)
		}
		u.Path = "/" + dbname
		u.RawPath = ""
		return u.String(), nil
	}
	// keyword/value form: a later keyword overrides an earlier one.
	return base + " dbname=" + dbname, nil
}

// redacted returns the connection string with any password masked, for
// messages.
func redacted(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return dsn
}

// adminConn connects to the configured maintenance database, failing the
// test with instructions when no server answers.
func adminConn(t testing.TB, ctx context.Context) *pgx.Conn {
	t.Helper()
	conn, err := connectAdmin(ctx)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return conn
}

func connectAdmin(ctx context.Context) (*pgx.Conn, error) {
	base := DatabaseURL()
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		return nil, fmt.Errorf("parse TEST_DATABASE_URL %q: %w", redacted(base), err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("no PostgreSQL server answers at %s: %w\n"+
			"Start the local one with `pg_ctlcluster 15 main start` (check with `pg_isready -h 127.0.0.1 -p 5432`), "+
			"or set TEST_DATABASE_URL to a server whose user may CREATE DATABASE.", redacted(base), err)
	}
	return conn, nil
}

// newDB creates a database copied from tmpl, opens a pool on it and
// registers its teardown.
func newDB(t testing.TB, tmpl string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	name := databaseName(t)
	dsn, err := withDatabase(DatabaseURL(), name)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}

	admin := adminConn(t, ctx)
	err = createDatabase(ctx, admin, name, tmpl)
	_ = admin.Close(ctx)
	if err != nil {
		t.Fatalf("testkit: create database %s: %v", name, err)
	}
	t.Cleanup(func() { dropDatabase(t, name) })

	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("testkit: parse DSN of %s: %v", name, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testkit: open pool on %s: %v", name, err)
	}
	t.Cleanup(pool.Close) // runs before the drop: cleanups run last-in first-out
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("testkit: ping %s: %v", name, err)
	}
	return &DB{Name: name, DSN: dsn, Pool: pool}
}

// createDatabase runs CREATE DATABASE name TEMPLATE tmpl, retrying while
// the template is briefly in use (SQLSTATE 55006, e.g. by autovacuum).
func createDatabase(ctx context.Context, conn *pgx.Conn, name, tmpl string) error {
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{tmpl}.Sanitize()
	for attempt := 1; ; attempt++ {
		_, err := conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if err == nil || attempt == 20 || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// dropDatabase drops the test database, disconnecting any session left.
func dropDatabase(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := connectAdmin(ctx)
	if err != nil {
		t.Errorf("testkit: drop database %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Errorf("testkit: drop database %s: %v", name, err)
	}
}

// databaseName returns a unique name that shows which test made it:
// redrive_test_<8 random hex>_<test name>, at most 63 bytes.
func databaseName(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "redrive_test_" + hex.EncodeToString(b[:]) + "_"
	var s strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if s.Len()+len(name) >= 63 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			s.WriteRune(r)
		} else {
			s.WriteByte('_')
		}
	}
	return name + s.String()
}

// migrate applies the project migrations to the database at dsn.
func migrate(ctx context.Context, dsn string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	return migrations.Up(ctx, db)
}

var tmplState struct {
	once sync.Once
	name string
	err  error
}

// migratedTemplate returns the name of the migrated template database,
// building it when no test binary has yet. The name carries a hash of the
// migrations embedded in this binary, so binaries built from other
// migrations use other templates.
func migratedTemplate() (string, error) {
	tmplState.once.Do(func() {
		sum := migrationsHash()
		tmplState.name = "redrive_tmpl_" + sum[:16]
		tmplState.err = buildTemplate(tmplState.name)
	})
	return tmplState.name, tmplState.err
}

// buildTemplate creates the template database name unless it exists. It
// holds an advisory lock while building so that concurrent test binaries
// build it once; the database is built under a temporary name and renamed
// when complete, so an existing template is always a complete one.
func buildTemplate(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := connectAdmin(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)

	exists := func() (bool, error) {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n)
		return n > 0, err
	}
	if ok, err := exists(); err != nil || ok {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return fmt.Errorf("take template lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey) }()
	if ok, err := exists(); err != nil || ok {
		return err
	}

	// Builds left by killed test binaries and old templates of other
	// migration sets are stale.
	if err := dropStaleTemplates(ctx, conn, name); err != nil {
		return err
	}
	building := name + "_build"
	quoted := pgx.Identifier{building}.Sanitize()
	if err := createDatabase(ctx, conn, building, "template0"); err != nil {
		return fmt.Errorf("create %s: %w", building, err)
	}
	dsn, err := withDatabase(DatabaseURL(), building)
	if err != nil {
		return err
	}
	if err := migrate(ctx, dsn); err != nil {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+quoted+" WITH (FORCE)")
		return fmt.Errorf("apply migrations: %w", err)
	}
	// No connections to the template from now on: copying needs none, and
	// this keeps autovacuum and stray sessions out of it.
	for _, stmt := range []string{
		"ALTER DATABASE " + quoted + " WITH ALLOW_CONNECTIONS false",
		"ALTER DATABASE " + quoted + " RENAME TO " + pgx.Identifier{name}.Sanitize(),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("finish template %s: %w", name, err)
		}
	}
	return nil
}

// keptTemplates is how many templates of other migration sets dropStaleTemplates keeps: test
// binaries of several checkouts (branches with other migrations) share one server, and each
// needs its template while its tests run.
const keptTemplates = 4

// dropStaleTemplates drops the builds left by killed test binaries (nobody else builds while
// we hold the lock) and the templates of other migration sets but the keptTemplates newest,
// never keep. A test binary still copying a template dropped here would fail; that takes more
// than keptTemplates other migration sets in use at once.
func dropStaleTemplates(ctx context.Context, conn *pgx.Conn, keep string) error {
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database
		WHERE datname LIKE 'redrive\_tmpl\_%' AND datname <> $1 ORDER BY oid DESC`, keep)
	if err != nil {
		return fmt.Errorf("list stale templates: %w", err)
	}
	others, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list stale templates: %w", err)
	}
	kept := 0
	for _, name := range others {
		if !strings.HasSuffix(name, "_build") && kept < keptTemplates {
			kept++
			continue
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop stale template %s: %w", name, err)
		}
	}
	return nil
}

// migrationsHash hashes the migrations embedded in this binary, together
// with the template layout version.
func migrationsHash() string {
	h := sha256.Sum256([]byte(templateVersion + "\x00" + migrations.Digest()))
	return hex.EncodeToString(h[:])
}
