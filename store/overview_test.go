package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

func TestOpenFailures(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	insertFixture(t, pool, fixtureRow{State: store.StateRetryPending, Temporality: avro.Temporary, Topic: "a", PublisherService: "s1"})
	insertFixture(t, pool, fixtureRow{State: store.StatePermanent, Temporality: avro.Unknown, Topic: "a", PublisherService: "s2"})
	insertFixture(t, pool, fixtureRow{State: store.StatePermanent, Topic: "b", PublisherService: "s1"})
	insertFixture(t, pool, fixtureRow{State: store.StateClosed, Topic: "c", PublisherService: "s3"})
	insertFixture(t, pool, fixtureRow{State: store.StateResent, Temporality: avro.Temporary, Topic: "c", PublisherService: "s3"})
	b, err := s.OpenFailures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Total != 3 || b.ByTemporality[avro.Temporary] != 1 || b.ByTemporality[avro.Unknown] != 1 || b.ByTemporality[avro.Permanent] != 1 ||
		b.ByTopic["a"] != 2 || b.ByTopic["b"] != 1 || b.ByTopic["c"] != 0 || b.ByPublisherService["s1"] != 2 || len(b.ByPublisherService) != 2 {
		t.Fatalf("open failures = %+v", b)
	}
}

func TestFailuresOverTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 30, 0, 0, time.UTC)
	_, pool := fixtureStore(t)
	s, err := store.New(store.Config{Pool: pool, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{
		since.Add(-time.Second), // before the window
		since, since.Add(59 * time.Minute), since.Add(2*time.Hour + 5*time.Minute), now,
	} {
		insertFixture(t, pool, fixtureRow{CreatedAt: at})
	}
	got, err := s.FailuresOverTime(context.Background(), since, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.TimeBucket{{Start: since, Count: 2}, {Start: since.Add(2 * time.Hour), Count: 1}, {Start: since.Add(3 * time.Hour), Count: 1}}
	if len(got) != len(want) {
		t.Fatalf("buckets = %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || got[i].Count != want[i].Count {
			t.Errorf("bucket %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := s.FailuresOverTime(context.Background(), since, time.Millisecond); err == nil {
		t.Error("a bucket below one second is accepted")
	}
	if _, err := s.FailuresOverTime(context.Background(), now.AddDate(-5, 0, 0), time.Minute); err == nil {
		t.Error("millions of buckets are accepted")
	}
}
