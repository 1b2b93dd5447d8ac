package pgtemp

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStartStop(t *testing.T) {
	if _, err := FindBinDir(); err != nil {
		t.Fatalf("this machine should have PostgreSQL binaries: %v", err)
	}
	ctx := context.Background()
	c, err := Start(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Dir()
	conn, err := pgx.Connect(ctx, c.DSN())
	if err != nil {
		c.Stop(ctx)
		t.Fatal(err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("SELECT 1 = %d, %v", one, err)
	}
	conn.Close(ctx)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp dir %s still there: %v", dir, err)
	}
	if _, err := pgx.Connect(ctx, c.DSN()); err == nil {
		t.Fatal("server still answers after Stop")
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestMissingBinaries(t *testing.T) {
	_, err := Start(context.Background(), Config{BinDir: t.TempDir()})
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("err = %v, want ErrNoBinaries", err)
	}
}
