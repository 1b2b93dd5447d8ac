package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redrive/redrive/store"
)

// relayAll takes every waiting event, a page at a time, and returns them.
func relayAll(t *testing.T, s *store.Store, limit int) []store.NotifyEvent {
	t.Helper()
	var all []store.NotifyEvent
	for {
		n, err := s.RelayNotifyEvents(context.Background(), limit, func(_ context.Context, es []store.NotifyEvent) ([]store.Notification, error) {
			all = append(all, es...)
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < limit {
			return all
		}
	}
}

// The triggers write an event for exactly the changes that are notified, whatever writes them;
// each comes with its subject.
func TestNotifyEventsFromChanges(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	pending := insertFixture(t, pool, fixtureRow{State: store.StateRetryPending, ErrorCode: "A"}) // a new group: one event
	insertFixture(t, pool, fixtureRow{State: store.StateRetryPending, ErrorCode: "A"})            // same group: none
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// Exhausted by the scheduler: one event; updated again while PERMANENT: none.
	exec(`UPDATE failures SET state = 'PERMANENT', state_reason = $2, next_attempt_at = NULL WHERE id = $1`, pending, store.StateReasonRetriesExhausted)
	exec(`UPDATE failures SET updated_at = now(), state = 'PERMANENT' WHERE id = $1`, pending)
	// PERMANENT for another reason: none.
	insertFixture(t, pool, fixtureRow{State: store.StatePermanent, ErrorCode: "A"})
	// A job that ends: one event, and none for its later updates or for a job that runs.
	exec(`INSERT INTO jobs (action, state, principal, selection, rate_limit, token_hash, total, created_at, preview_expires_at, updated_at)
		VALUES ('close', 'RUNNING', 'alice', '{}', 10, '\x00', 1, now(), now(), now())`)
	exec(`UPDATE jobs SET state = 'CANCELED', finished_at = now()`)
	exec(`UPDATE jobs SET updated_at = now(), state = 'CANCELED'`)

	events := relayAll(t, s, 2)
	if len(events) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(events), events)
	}
	if e := events[0]; e.EventType != store.NotifyEventGroupNew || e.Group == nil || e.Group.ErrorCode != "A" {
		t.Errorf("first event %+v", e)
	}
	if e := events[1]; e.EventType != store.NotifyEventFailureExhausted || e.Failure == nil || e.Failure.ID != pending {
		t.Errorf("second event %+v", e)
	}
	if e := events[2]; e.EventType != store.NotifyEventJobFinished || e.Job == nil || e.Job.State != "CANCELED" {
		t.Errorf("third event %+v", e)
	}
	if n, err := s.NotifyEventsWaiting(ctx); err != nil || n != 0 {
		t.Errorf("waiting after the relay: %d, %v", n, err)
	}
}

// A page is all or nothing: when the builder fails, its events wait for the next taker and no
// notification is stored; when it succeeds, the notifications are stored once (by webhook and
// key) and the events are gone. Two takers at once get different events.
func TestRelayNotifyEventsAtomicAndDisjoint(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO failure_groups (publisher_service, error_code) SELECT 'svc', 'E' || g FROM generate_series(1, 10) g`); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	note := func(e store.NotifyEvent) store.Notification {
		return store.Notification{Webhook: "w", EventType: e.EventType, DedupeKey: e.EventType + ":" + e.Subject, Payload: map[string]any{"k": e.Subject}}
	}
	if _, err := s.RelayNotifyEvents(ctx, 4, func(_ context.Context, es []store.NotifyEvent) ([]store.Notification, error) {
		return []store.Notification{note(es[0])}, boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing builder: %v", err)
	}
	if n, _ := s.NotifyEventsWaiting(ctx); n != 10 {
		t.Fatalf("%d waiting after a failed page, want 10", n)
	}
	// Taker one holds its page while taker two runs.
	holding, release := make(chan struct{}), make(chan struct{})
	var first []store.NotifyEvent
	done := make(chan error)
	go func() {
		_, err := s.RelayNotifyEvents(ctx, 4, func(_ context.Context, es []store.NotifyEvent) ([]store.Notification, error) {
			first = es
			close(holding)
			<-release
			var ns []store.Notification
			for _, e := range es {
				ns = append(ns, note(e))
			}
			return ns, nil
		})
		done <- err
	}()
	<-holding
	second := relayAll(t, s, 4)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, e := range append(append([]store.NotifyEvent{}, first...), second...) {
		if seen[e.ID] {
			t.Errorf("event %d taken twice", e.ID)
		}
		seen[e.ID] = true
	}
	if len(seen) != 10 || len(first) != 4 {
		t.Errorf("%d events taken (%d by the first), want 10 (4)", len(seen), len(first))
	}
	log, err := s.ListNotifications(ctx, 0, 100)
	if err != nil || len(log) != 4 {
		t.Errorf("stored %d notifications, want the first taker's 4: %v", len(log), err)
	}
	if n, err := s.EnqueueNotifications(ctx, []store.Notification{note(first[0])}); err != nil || n != 0 {
		t.Errorf("a repeat stored %d, %v", n, err)
	}
}
