package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/store"
)

// RecordJobItems records the outcomes of a batch whatever the order and gaps of its seqs, and
// an item that already has its outcome keeps it and is not counted again.
func TestRecordJobItemsBatches(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	var ids []uuid.UUID
	for range 6 {
		ids = append(ids, insertFixture(t, pool, fixtureRow{State: store.StatePermanent}))
	}
	now := time.Now()
	token := []byte("0123456789abcdef0123456789abcdef")
	job, err := s.CreateJob(ctx, store.CreateJobParams{Action: "close", IDs: ids, Principal: "bob", Reason: "r",
		Selection: map[string]any{"ids": len(ids)}, RateLimit: 10, Token: token, Now: now, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartJob(ctx, job.ID, token, "bob", now); err != nil {
		t.Fatal(err)
	}
	if claimed, err := s.ClaimJob(ctx, "me", now, now.Add(time.Minute)); err != nil || claimed == nil || claimed.ID != job.ID {
		t.Fatalf("claim job: %+v, %v", claimed, err)
	}
	// Seqs 5, 2 and 4 (unordered, with gaps), then 2 again with 1 and 3.
	got, err := s.RecordJobItems(ctx, job.ID, "me", []store.JobItemResult{
		{Seq: 5, Outcome: store.JobItemDone}, {Seq: 2, Outcome: store.JobItemSkipped, Detail: "gone"}, {Seq: 4, Outcome: store.JobItemFailed, Detail: "x"},
	}, now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.Done != 1 || got.Skipped != 1 || got.Failed != 1 || got.CursorSeq != 5 {
		t.Fatalf("after the first batch: %+v", got)
	}
	got, err = s.RecordJobItems(ctx, job.ID, "me", []store.JobItemResult{
		{Seq: 2, Outcome: store.JobItemDone}, {Seq: 1, Outcome: store.JobItemDone}, {Seq: 3, Outcome: store.JobItemDone},
	}, now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.Done != 3 || got.Skipped != 1 || got.Failed != 1 || got.State != store.JobRunning {
		t.Fatalf("after the second batch: %+v", got)
	}
	items, _, err := s.JobItems(ctx, store.JobItemsParams{JobID: job.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.JobItemOutcome{store.JobItemDone, store.JobItemSkipped, store.JobItemDone, store.JobItemFailed, store.JobItemDone, ""}
	for i, it := range items {
		if it.Outcome != want[i] {
			t.Errorf("item %d: outcome %q, want %q", it.Seq, it.Outcome, want[i])
		}
	}
	got, err = s.RecordJobItems(ctx, job.ID, "me", []store.JobItemResult{{Seq: 6, Outcome: store.JobItemDone}}, now, now.Add(time.Minute))
	if err != nil || got.State != store.JobDone || got.Done != 4 {
		t.Fatalf("after the last item: %+v, %v", got, err)
	}
}
