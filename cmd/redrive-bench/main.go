// Command redrive-bench runs redrive's end-to-end benchmarks against a real PostgreSQL and an
// in-process (or real) Kafka cluster: `redrive-bench <benchmark> [flags]`. Each benchmark
// registers itself in commands from its own file; docs/benchmarks.md records the figures.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/redrive/redrive/migrations"
)

// commands maps a benchmark name to its entry point, which parses its own flags from args.
var commands = map[string]func(ctx context.Context, args []string) error{}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 || commands[args[0]] == nil {
		names := make([]string, 0, len(commands))
		for name := range commands {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: redrive-bench <benchmark> [flags]\nbenchmarks: %v\n", names)
		return 2
	}
	if err := commands[args[0]](ctx, args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "redrive-bench %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// scratchDatabase creates a migrated database on the server at serverURL and returns a pool on
// it and a function that drops it.
func scratchDatabase(ctx context.Context, serverURL string) (*pgxpool.Pool, func(), error) {
	return scratchDatabaseAt(ctx, serverURL, 0)
}

// scratchDatabaseAt is scratchDatabase with the migrations applied up to version (all of them
// when version is 0).
func scratchDatabaseAt(ctx context.Context, serverURL string, version int64) (*pgxpool.Pool, func(), error) {
	return scratchDatabaseTraced(ctx, serverURL, version, nil)
}

// scratchDatabaseTraced is scratchDatabaseAt whose pool's connections report every statement
// to tracer (when not nil).
func scratchDatabaseTraced(ctx context.Context, serverURL string, version int64, tracer pgx.QueryTracer) (*pgxpool.Pool, func(), error) {
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", serverURL, err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "redrive_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		return nil, nil, fmt.Errorf("create database: %w", err)
	}
	drop := func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(c, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "drop database %s: %v\n", name, err)
		}
		admin.Close(c)
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("parse database URL: %w", err)
	}
	u.Path = "/" + name
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		drop()
		return nil, nil, err
	}
	sqlDB := stdlib.OpenDB(*cfg)
	if version == 0 {
		err = migrations.Up(ctx, sqlDB)
	} else {
		err = migrations.UpTo(ctx, sqlDB, version)
	}
	_ = sqlDB.Close()
	if err != nil {
		drop()
		return nil, nil, err
	}
	pcfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		drop()
		return nil, nil, err
	}
	if !strings.Contains(serverURL, "pool_max_conns") {
		pcfg.MaxConns = 16
	}
	if tracer != nil {
		pcfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		drop()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); drop() }, nil
}

// scratchServerFlag defines the -database-url flag of the benchmarks that work in a scratch
// database (scratchDatabase).
func scratchServerFlag(fs *flag.FlagSet) *string {
	return fs.String("database-url", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		"PostgreSQL server whose user may CREATE DATABASE; a scratch database is created and dropped (env DATABASE_URL)")
}

// startCluster starts an in-process kfake cluster with the given topics (name → partitions)
// and returns it and its bootstrap servers.
func startCluster(topics map[string]int) (*kfake.Cluster, string, error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, "", fmt.Errorf("start kfake: %w", err)
	}
	for topic, p := range topics {
		if err := cluster.CreateTopic(topic, int32(p), nil); err != nil {
			cluster.Close()
			return nil, "", fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	return cluster, strings.Join(cluster.ListenAddrs(), ","), nil
}

// envOr returns the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
