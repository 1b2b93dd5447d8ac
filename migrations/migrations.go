// Package migrations holds redrive's numbered SQL migrations, embedded in the binary, and applies
// them with pressly/goose under a Postgres advisory lock, so that several instances may start at
// once.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// Digest returns a SHA-256 over the embedded migration files (names and contents), so that a
// cache of migrated databases, such as the test kit's template, can tell when they changed.
func Digest() string {
	h := sha256.New()
	entries, _ := files.ReadDir(".")
	for _, e := range entries {
		b, _ := files.ReadFile(e.Name())
		fmt.Fprintf(h, "\x00%s\x00%d\x00", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ErrNotMigrated means the database schema is older than this binary expects.
var ErrNotMigrated = errors.New("database schema is not migrated: run `redrive migrate`")

// ErrSchemaNewer means the database schema is newer than this binary knows.
var ErrSchemaNewer = errors.New("database schema is newer than this redrive binary: upgrade redrive")

func provider(db *sql.DB) (*goose.Provider, error) {
	// Probe the lock every second for up to 5 minutes: a concurrent instance usually finishes
	// within a second or two.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("migration provider: %w", err)
	}
	return p, nil
}

// Up applies every pending migration. It is idempotent and safe to run from several processes at
// once: a session-level advisory lock serialises them.
func Up(ctx context.Context, db *sql.DB) error {
	p, err := provider(db)
	if err != nil {
		return err
	}
	// No p.Close: it would close the caller's db.
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// UpTo applies the pending migrations up to and including version, under the same lock as
// Up. It is for benchmarks and tools that need a database of an older layout (for example to
// measure an upgrade); redrive itself always runs Up.
func UpTo(ctx context.Context, db *sql.DB, version int64) error {
	p, err := provider(db)
	if err != nil {
		return err
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("apply migrations up to %d: %w", version, err)
	}
	return nil
}

// Latest is the version of the newest embedded migration.
func Latest() int64 {
	var latest int64
	entries, _ := files.ReadDir(".")
	for _, e := range entries {
		var v int64
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// versionTable is goose's default version table.
const versionTable = "goose_db_version"

// Version returns the schema version of the database: the newest applied migration, or 0 when
// no migration was ever applied. It only reads: it neither creates goose's version table nor
// waits for the migration lock.
func Version(ctx context.Context, db *sql.DB) (int64, error) {
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", versionTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int64
	if err := db.QueryRowContext(ctx, "SELECT coalesce(max(version_id), 0) FROM "+versionTable).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Check returns nil when the database is at exactly the version this binary expects, else
// an error wrapping ErrNotMigrated or ErrSchemaNewer that says both versions. Like Version, it
// only reads.
func Check(ctx context.Context, db *sql.DB) error {
	current, err := Version(ctx, db)
	if err != nil {
		return err
	}
	switch want := Latest(); {
	case current == 0:
		return fmt.Errorf("%w (database has no schema, binary wants version %d)", ErrNotMigrated, want)
	case current < want:
		return fmt.Errorf("%w (database at version %d, binary wants %d)", ErrNotMigrated, current, want)
	case current > want:
		return fmt.Errorf("%w (database at version %d, binary knows up to %d)", ErrSchemaNewer, current, want)
	}
	return nil
}
