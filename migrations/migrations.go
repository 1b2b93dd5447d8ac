// Package migrations holds redrive's numbered SQL migrations, embedded in the binary, and applies
// them with pressly/goose under a Postgres advisory lock, so that several instances may start at
// once.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// ErrNotMigrated means the database schema is older than this binary expects.
var ErrNotMigrated = errors.New("database schema is not migrated: run `redrive migrate`")

// ErrSchemaNewer means the database schema is newer than this binary knows.
var ErrSchemaNewer = errors.New("database schema is newer than this redrive binary: upgrade redrive")

func provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
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
	defer p.Close()
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
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

// Check returns nil when the database is at exactly the version this binary expects, else
// an error wrapping ErrNotMigrated or ErrSchemaNewer that says both versions.
func Check(ctx context.Context, db *sql.DB) error {
	p, err := provider(db)
	if err != nil {
		return err
	}
	defer p.Close()
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		if errors.Is(err, goose.ErrVersionNotFound) {
			return fmt.Errorf("%w (database has no schema, binary wants version %d)", ErrNotMigrated, Latest())
		}
		return fmt.Errorf("read schema version: %w", err)
	}
	switch want := Latest(); {
	case current < want:
		return fmt.Errorf("%w (database at version %d, binary wants %d)", ErrNotMigrated, current, want)
	case current > want:
		return fmt.Errorf("%w (database at version %d, binary knows up to %d)", ErrSchemaNewer, current, want)
	}
	return nil
}
