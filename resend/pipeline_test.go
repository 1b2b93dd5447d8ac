package resend

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// When Run's context ends in the middle of a bulk resend, the batches already claimed are still
// sent, and every acknowledged record's failure is marked RESENT before Run returns: no row is
// left leased, and the topic holds exactly the RESENT failures.
func TestShutdownMarksAcknowledgedRows(t *testing.T) {
	t.Parallel()
	const (
		topic = "orders"
		n     = 3000
	)
	e := newEnv(t, map[string]int{topic: 2})
	e.insertDue(t, topic, n, 200)
	s := e.scheduler(t, func(c *Config) {
		c.DisableAutomatic, c.Interval = false, 10*time.Millisecond
		c.BatchSize = 25
		c.Concurrency = 2
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, time.Minute, "a first acknowledged batch", func() bool {
		return testutil.ToFloat64(s.metrics.acked.WithLabelValues(TriggerAuto)) > 0
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context ended")
	}

	acked := testutil.ToFloat64(s.metrics.acked.WithLabelValues(TriggerAuto))
	resent := e.countState(t, redrive.StateResent)
	pending := e.countState(t, redrive.StateRetryPending)
	t.Logf("stopped after %d of %d failures", resent, n)
	if resent+pending != n {
		t.Fatalf("%d RESENT + %d RETRY_PENDING, want %d in all", resent, pending, n)
	}
	if int(acked) != resent {
		t.Errorf("%v records acknowledged but %d failures RESENT", acked, resent)
	}
	if got := e.records(topic); got != int64(resent) {
		t.Errorf("topic holds %d records, want %d (one per RESENT failure)", got, resent)
	}
	if m := testutil.ToFloat64(s.metrics.resends.WithLabelValues(TriggerAuto, string(redrive.OutcomeResent))); int(m) != resent {
		t.Errorf("resent metric %v, want %d", m, resent)
	}
	var leased int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM resend_claims`).Scan(&leased); err != nil {
		t.Fatal(err)
	}
	if leased != 0 {
		t.Errorf("%d resend claims left after Run returned", leased)
	}
}

// A bulk resend in one round: the claims walk the due rows (all due at the same instant) in
// order, batch after batch, and every failure is sent once and marked RESENT. The round has more
// batches than the marker lets wait (markBacklog), so marks run while it still sends.
func TestBulkRoundSendsEachRowOnce(t *testing.T) {
	t.Parallel()
	const (
		topic = "orders"
		n     = 1200
		batch = 25
	)
	if n/batch <= markBacklog {
		t.Fatalf("%d batches do not exceed the mark backlog %d", n/batch, markBacklog)
	}
	e := newEnv(t, map[string]int{topic: 3})
	e.insertDue(t, topic, n, 100)
	s := e.scheduler(t, func(c *Config) {
		c.BatchSize = batch
		c.Concurrency = 3
	})
	st, err := s.round(context.Background())
	if err != nil {
		t.Fatalf("round: %v", err)
	}
	if st.claimed != n || st.resent != n || st.failed != 0 {
		t.Fatalf("round %+v, want %d claimed and resent", st, n)
	}
	if got := e.countState(t, redrive.StateResent); got != n {
		t.Fatalf("%d failures RESENT, want %d", got, n)
	}
	if got := e.records(topic); got != n {
		t.Fatalf("topic holds %d records, want %d", got, n)
	}
	var claims int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM resend_claims`).Scan(&claims); err != nil || claims != 0 {
		t.Fatalf("%d claims left after the round (%v), want 0", claims, err)
	}
	st, err = s.round(context.Background())
	if err != nil || st.claimed != 0 {
		t.Fatalf("second round %+v, %v: nothing is due any more", st, err)
	}
}
