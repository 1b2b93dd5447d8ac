package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/migrations"
)

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.EmptyPostgres(t)
	migrate := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := runMigrate(ctx, append([]string{"-database-url", db.DSN}, args...), stdio{out: &out, err: &errOut})
		return out.String(), errOut.String(), err
	}
	if _, _, err := migrate("-check"); !errors.Is(err, migrations.ErrNotMigrated) || !strings.Contains(err.Error(), "redrive migrate") {
		t.Fatalf("migrate -check on an empty database = %v, want ErrNotMigrated saying what to run", err)
	}
	out, _, err := migrate()
	if want := fmt.Sprintf("schema migrated from version 0 to %d\n", migrations.Latest()); err != nil || out != want {
		t.Fatalf("migrate = %q, %v; want %q", out, err, want)
	}
	out, _, err = migrate()
	if want := fmt.Sprintf("schema already at version %d\n", migrations.Latest()); err != nil || out != want {
		t.Fatalf("migrate again = %q, %v; want %q", out, err, want)
	}
	out, _, err = migrate("-check")
	if err != nil || !strings.Contains(out, "current") {
		t.Fatalf("migrate -check = %q, %v", out, err)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	db := testkit.EmptyPostgres(t)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errOut bytes.Buffer
			// serve's URL, pool parameters included, works for migrate too.
			errs[i] = runMigrate(context.Background(), []string{"-database-url", db.DSN + "&pool_max_conns=3"}, stdio{out: &out, err: &errOut})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	var out, errOut bytes.Buffer
	if err := runMigrate(context.Background(), []string{"-database-url", db.DSN, "-check"}, stdio{out: &out, err: &errOut}); err != nil {
		t.Errorf("check after concurrent migrations: %v", err)
	}
}

func TestMigrateNeedsDatabaseURL(t *testing.T) {
	t.Setenv("REDRIVE_DATABASE_URL", "")
	var out, errOut bytes.Buffer
	err := runMigrate(context.Background(), nil, stdio{out: &out, err: &errOut})
	if !errors.Is(err, errUsage) || !strings.Contains(errOut.String(), "REDRIVE_DATABASE_URL") {
		t.Fatalf("migrate without a URL = %v, stderr %q; want a usage error naming REDRIVE_DATABASE_URL", err, errOut.String())
	}
}
