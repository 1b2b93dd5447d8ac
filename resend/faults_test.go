package resend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"
)

// The database fails between the acknowledgements and the marks: nothing is lost. The rows stay
// RETRY_PENDING and claimed, so no round resends them while the claims run; when the claims
// expire they are resent once more and marked (at-least-once).
func TestDatabaseFailsBeforeTheMark(t *testing.T) {
	t.Parallel()
	const (
		topic = "orders"
		n     = 20
	)
	e := newEnv(t, map[string]int{topic: 2})
	s := e.scheduler(t, func(c *Config) { c.BatchSize = 10 })
	e.insertDue(t, topic, n, 50)
	ctx := context.Background()

	// SHARE mode lets the claims and loads read failures but blocks the marks' UPDATE.
	lock, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, "LOCK TABLE failures IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		st  roundStats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := s.round(ctx)
		done <- result{st, err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for e.records(topic) < n || !e.markWaiting(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records on the topic, marks waiting %v: want %d and a waiting mark", e.records(topic), e.markWaiting(t), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The database drops the marks' connections, as a failover does.
	if _, err := e.pool.Exec(ctx, `
		SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%RESENT%'`); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err == nil || res.st.resent != 0 || res.st.failed != n {
		t.Fatalf("round: %+v, %v; want an error and %d failed marks", res.st, res.err, n)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.countState(t, redrive.StateRetryPending); got != n {
		t.Fatalf("%d failures RETRY_PENDING after the failed marks, want %d", got, n)
	}

	// The claims still hold the rows: no round resends them yet.
	if st, err := s.round(ctx); err != nil || st.claimed != 0 {
		t.Fatalf("round while the claims run: %+v, %v; want nothing claimed", st, err)
	}
	if got := e.records(topic); got != n {
		t.Fatalf("%d records on the topic, want %d", got, n)
	}
	// They expire: the rows are resent once more and marked.
	e.clock.Advance(s.cfg.Lease + time.Second)
	if st, err := s.round(ctx); err != nil || st.resent != n {
		t.Fatalf("round after the claims expired: %+v, %v", st, err)
	}
	if got := e.countState(t, redrive.StateResent); got != n {
		t.Fatalf("%d failures RESENT, want %d", got, n)
	}
	if got := e.records(topic); got != 2*n {
		t.Fatalf("%d records on the topic, want %d (each resent twice)", got, 2*n)
	}
	var claims int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM resend_claims`).Scan(&claims); err != nil || claims != 0 {
		t.Fatalf("%d claims left (%v), want 0", claims, err)
	}
}

// markWaiting reports whether a mark of this test's database waits for a lock.
func (e *env) markWaiting(t *testing.T) bool {
	t.Helper()
	var queries []string
	rows, err := e.pool.Query(context.Background(), `
		SELECT query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		queries = append(queries, q)
	}
	return strings.Contains(strings.Join(queries, "\n"), "RESENT")
}
