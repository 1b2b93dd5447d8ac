// Package storekit builds the failure store for the tests of packages that never import
// package store themselves (api and web): they hand the store to operator.Config,
// resend.Config, jobs.Config and auth.SessionsConfig, and set up state through the helpers
// here, while speaking the domain types of package redrive.
package storekit

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/store"
)

// Store is the failure store (store.Store), for the fields of test fixtures.
type Store = store.Store

// New returns a store over pool; it fails the test when it cannot.
func New(t testing.TB, pool *pgxpool.Pool) *Store {
	t.Helper()
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Reactivation says which reactivation run StartReactivation records.
type Reactivation struct {
	Topic, Principal, Reason string
	Limit                    int64
	UpToNow                  bool
}

// StartReactivation records a RUNNING reactivation run of r.Topic, as the intake's
// reactivator does; a run without progress for an hour counts as interrupted.
func StartReactivation(ctx context.Context, s *Store, r Reactivation) (*redrive.Reactivation, error) {
	run, _, err := s.StartReactivation(ctx, store.StartReactivationParams{Topic: r.Topic, Principal: r.Principal,
		Reason: r.Reason, Limit: r.Limit, UpToNow: r.UpToNow, StaleAfter: time.Hour})
	return run, err
}
