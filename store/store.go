// Package store owns every SQL statement of redrive: the failures, their groups and the audit
// log in Postgres (pgx/v5), and the state transitions of a failure (docs/states.md). It
// speaks the domain types of package redrive (the domain leaf): it turns a redrive.Filter into
// SQL, returns redrive types, and turns pgx errors into the domain errors redrive.ErrNotFound
// and redrive.ErrConflict; only package api maps them to HTTP statuses. The domain names it
// exported before the leaf existed remain as deprecated aliases (compat.go).
//
// A failure is stored as a record written once by the intake (failure_records), a narrow
// state that every change of state rewrites (failure_states), its idempotence key
// (failure_keys) and its stack trace, once per hash (failure_texts); records and states are
// partitioned by created_at, and retention drops whole partitions (partitions.go). The view
// failures joins them for reading; the store writes the tables (docs/operations.md, "Storage
// layout").
package store

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is redrive's Postgres store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// Config configures a Store.
type Config struct {
	// Pool is the connection pool. Required.
	Pool *pgxpool.Pool
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// New returns a Store for cfg.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("invalid config: Pool is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{pool: cfg.Pool, now: cfg.Now}, nil
}

// Pool returns the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
