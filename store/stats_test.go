package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

func TestFailureStats(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	st, err := s.FailureStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 0 || st.ByState[store.StateClosed] != 0 || len(st.ByState) != 4 || len(st.ByTemporality) != 3 ||
		st.OldestPending != nil || st.OldestPermanent != nil || len(st.ByTopic) != 0 {
		t.Errorf("stats of an empty store = %+v", st)
	}
	old := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	insertFixture(t, pool, fixtureRow{State: store.StateRetryPending, Temporality: avro.Temporary, Topic: "a", PublisherService: "s1", CreatedAt: old})
	insertFixture(t, pool, fixtureRow{State: store.StateRetryPending, Temporality: avro.Temporary, Topic: "a", PublisherService: "s2"})
	insertFixture(t, pool, fixtureRow{State: store.StatePermanent, Topic: "b", PublisherService: "s1", CreatedAt: old.Add(time.Hour)})
	insertFixture(t, pool, fixtureRow{State: store.StateClosed, Temporality: avro.Unknown, Topic: "b", PublisherService: "s1"})
	st, err = s.FailureStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 4 || st.ByState[store.StateRetryPending] != 2 || st.ByState[store.StateResent] != 0 ||
		st.ByTemporality[avro.Temporary] != 2 || st.ByTemporality[avro.Permanent] != 1 || st.ByTemporality[avro.Unknown] != 1 ||
		st.ByTopic["a"] != 2 || st.ByTopic["b"] != 2 || st.ByPublisherService["s1"] != 3 || st.ByPublisherService["s2"] != 1 {
		t.Errorf("stats = %+v", st)
	}
	if !st.OldestPending.Equal(old) || !st.OldestPermanent.Equal(old.Add(time.Hour)) {
		t.Errorf("oldest = %v / %v", st.OldestPending, st.OldestPermanent)
	}
	// RESENT failures are the totals less the others (migration 026), by temporality, topic and
	// service alike.
	insertFixture(t, pool, fixtureRow{State: store.StateResent, Temporality: avro.Temporary, Topic: "a", PublisherService: "s2"})
	insertFixture(t, pool, fixtureRow{State: store.StateResent, Temporality: avro.Permanent, Topic: "c", PublisherService: "s1"})
	insertFixture(t, pool, fixtureRow{State: store.StateResent, Temporality: avro.Permanent, Topic: "c", PublisherService: "s1"})
	st, err = s.FailureStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 7 || st.ByState[store.StateResent] != 3 || st.ByState[store.StateClosed] != 1 || st.ByState[store.StatePermanent] != 1 ||
		st.ByState[store.StateRetryPending] != 2 || st.ByTemporality[avro.Temporary] != 3 || st.ByTemporality[avro.Permanent] != 3 ||
		st.ByTopic["a"] != 3 || st.ByTopic["c"] != 2 || st.ByPublisherService["s1"] != 5 || st.ByPublisherService["s2"] != 2 {
		t.Errorf("stats with RESENT failures = %+v", st)
	}
}
