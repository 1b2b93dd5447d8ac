package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

func TestStoreReactivationRuns(t *testing.T) {
	t.Parallel()
	pool := testkit.Postgres(t)
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, err := store.New(store.Config{Pool: pool, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := store.StartReactivationParams{Topic: "own.DLT", Principal: "alice", Limit: 10, StaleAfter: time.Minute}
	run, from, err := s.StartReactivation(ctx, p)
	if err != nil || len(from) != 0 || run.State != store.ReactivationRunning {
		t.Fatalf("start = %+v, %v, %v", run, from, err)
	}
	if _, _, err := s.StartReactivation(ctx, p); !errors.Is(err, store.ErrReactivationRunning) || !errors.Is(err, store.ErrConflict) {
		t.Errorf("second start = %v, want ErrReactivationRunning", err)
	}
	if err := s.RecordReactivationStep(ctx, store.ReactivationStep{ID: run.ID, Read: 3, Reingested: 2, StillFailing: 1,
		Positions: map[int32]int64{0: 5, 1: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordReactivationStep(ctx, store.ReactivationStep{ID: run.ID, Positions: map[int32]int64{0: 4}}); err != nil {
		t.Fatal(err)
	}
	// A run without progress for StaleAfter is taken as dead by the next start.
	s2, _ := store.New(store.Config{Pool: pool, Now: func() time.Time { return now.Add(2 * time.Minute) }})
	run2, from, err := s2.StartReactivation(ctx, p)
	if err != nil || from[0] != 5 || from[1] != 2 {
		t.Fatalf("start after a stale run = %v, %v", from, err)
	}
	old, _ := s.ReactivationByID(ctx, run.ID)
	if old.State != store.ReactivationInterrupted || old.Read != 3 || old.Reingested != 2 || old.StillFailing != 1 || old.FinishedAt == nil {
		t.Errorf("stale run = %+v", old)
	}
	if err := s.RecordReactivationStep(ctx, store.ReactivationStep{ID: run.ID, Read: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("step of an interrupted run = %v, want ErrNotFound", err)
	}
	fin, err := s2.FinishReactivation(ctx, run2.ID, store.ReactivationFailed, "boom")
	if err != nil || fin.State != store.ReactivationFailed || *fin.Error != "boom" {
		t.Errorf("finish = %+v, %v", fin, err)
	}
	runs, more, err := s.ListReactivations(ctx, "own.DLT", 0, 10)
	if err != nil || len(runs) != 2 || runs[0].ID != run2.ID || more {
		t.Errorf("list = %+v, %v, %v", runs, more, err)
	}
	// Paged one by one, newest first.
	first, more, err := s.ListReactivations(ctx, "own.DLT", 0, 1)
	if err != nil || len(first) != 1 || first[0].ID != run2.ID || !more {
		t.Errorf("first page = %+v, %v, %v", first, more, err)
	}
	second, more, err := s.ListReactivations(ctx, "own.DLT", first[0].ID, 1)
	if err != nil || len(second) != 1 || second[0].ID != run.ID || more {
		t.Errorf("second page = %+v, %v, %v", second, more, err)
	}
}
