package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/redrive/redrive/migrations"
)

func runMigrate(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("migrate", "[-check] [-database-url URL]", std.err)
	dbURL := fs.String("database-url", envOr("REDRIVE_DATABASE_URL", ""), "Postgres connection string (env REDRIVE_DATABASE_URL)")
	check := fs.Bool("check", false, "only check that the schema is this binary's; exit 1 when it is not")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(std.err, "redrive migrate: unexpected arguments %q\n", fs.Args())
		return errUsage
	}
	if *dbURL == "" {
		fmt.Fprintln(std.err, "redrive migrate: REDRIVE_DATABASE_URL (-database-url) is required")
		return errUsage
	}
	db, err := openSQL(*dbURL)
	if err != nil {
		return fmt.Errorf("REDRIVE_DATABASE_URL: %w", err)
	}
	defer db.Close()

	before, err := migrations.Version(ctx, db)
	if err != nil {
		return err
	}
	if *check {
		if err := migrations.Check(ctx, db); err != nil {
			return err
		}
		_, err := fmt.Fprintf(std.out, "schema at version %d: current\n", before)
		return err
	}
	if err := migrations.Up(ctx, db); err != nil {
		return err
	}
	after, err := migrations.Version(ctx, db)
	if err != nil {
		return err
	}
	if err := migrations.Check(ctx, db); err != nil {
		if errors.Is(err, migrations.ErrSchemaNewer) {
			return fmt.Errorf("nothing applied: %w", err)
		}
		return err
	}
	if after == before {
		_, err = fmt.Fprintf(std.out, "schema already at version %d\n", after)
	} else {
		_, err = fmt.Fprintf(std.out, "schema migrated from version %d to %d\n", before, after)
	}
	return err
}

// openSQL opens a database/sql handle on dsn. It accepts the same URL as `serve`, pool_*
// parameters included (they configure serve's pool and are not sent to the server).
func openSQL(dsn string) (*sql.DB, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*pcfg.ConnConfig), nil
}
