package resend

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestHousekeeping(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	s := e.scheduler(t, func(c *Config) { c.Housekeeping.BatchSize = 1 })
	ctx := context.Background()
	now := e.clock.Now()
	day := 24 * time.Hour
	ago := func(d time.Duration) *time.Time { v := now.Add(-d); return &v }

	// In group "gone-service": only failures that expire.
	gone := []uuid.UUID{
		e.insertFailure(t, row{Service: "gone-service", State: redrive.StateResent, CreatedAt: *ago(40 * day), ResentAt: ago(31 * day)}),
		e.insertFailure(t, row{Service: "gone-service", State: redrive.StateClosed, CreatedAt: *ago(40 * day), ClosedAt: ago(31 * day)}),
		e.insertFailure(t, row{Service: "gone-service", State: redrive.StatePermanent, CreatedAt: *ago(200 * day), UpdatedAt: *ago(181 * day)}),
	}
	// In group "kept-service": some expire, some stay.
	expiring := e.insertFailure(t, row{Service: "kept-service", State: redrive.StateResent, CreatedAt: *ago(60 * day), ResentAt: ago(45 * day)})
	kept := []uuid.UUID{
		// Created long ago, but resent recently: the age counts from the resend.
		e.insertFailure(t, row{Service: "kept-service", State: redrive.StateResent, CreatedAt: *ago(40 * day), ResentAt: ago(29 * day)}),
		e.insertFailure(t, row{Service: "kept-service", State: redrive.StateClosed, CreatedAt: *ago(10 * day), ClosedAt: ago(10 * day)}),
		e.insertFailure(t, row{Service: "kept-service", State: redrive.StatePermanent, CreatedAt: *ago(200 * day), UpdatedAt: *ago(179 * day)}),
		// RETRY_PENDING is never deleted, however old.
		e.insertFailure(t, row{Service: "kept-service", CreatedAt: *ago(400 * day), NextAttemptAt: ago(300 * day)}),
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO audit_log (failure_id, action, principal) VALUES ($1, 'close', 'dave')`, gone[1]); err != nil {
		t.Fatal(err)
	}

	res, err := s.housekeep(ctx)
	if err != nil {
		t.Fatalf("housekeep: %v", err)
	}
	if res.Failures[redrive.StateResent] != 2 || res.Failures[redrive.StateClosed] != 1 || res.Failures[redrive.StatePermanent] != 1 || res.Groups != 1 {
		t.Fatalf("result %+v", res)
	}
	exists := func(id uuid.UUID) bool {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM failures WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	for _, id := range append(gone, expiring) {
		if exists(id) {
			t.Errorf("expired failure %s still exists", id)
		}
	}
	for _, id := range kept {
		if !exists(id) {
			t.Errorf("failure %s was deleted", id)
		}
	}
	var groups []string
	rows, _ := e.pool.Query(ctx, `SELECT publisher_service FROM failure_groups ORDER BY 1`)
	for rows.Next() {
		var g string
		_ = rows.Scan(&g)
		groups = append(groups, g)
	}
	if rows.Err() != nil || len(groups) != 1 || groups[0] != "kept-service" {
		t.Errorf("groups left: %v (%v), want only kept-service", groups, rows.Err())
	}
	var audits int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE failure_id = $1`, gone[1]).Scan(&audits); err != nil || audits != 1 {
		t.Errorf("audit entries of a deleted failure: %d (%v), want kept", audits, err)
	}
	if got := testutil.ToFloat64(s.metrics.deleted.WithLabelValues("RESENT")); got != 2 {
		t.Errorf("deleted RESENT metric %v, want 2", got)
	}
	if got := testutil.ToFloat64(s.metrics.deletedGroups); got != 1 {
		t.Errorf("deleted groups metric %v, want 1", got)
	}

	// A second run finds nothing.
	res, err = s.housekeep(ctx)
	if err != nil || res.Failures[redrive.StateResent]+res.Failures[redrive.StateClosed]+res.Failures[redrive.StatePermanent] != 0 {
		t.Fatalf("second run: %+v, %v", res, err)
	}
}

func TestDeleteExpiredRefusesRetryPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	if _, _, err := e.store.DeleteExpired(context.Background(), redrive.StateRetryPending, e.clock.Now(), 10); err == nil {
		t.Fatal("DeleteExpired accepted RETRY_PENDING")
	}
}
