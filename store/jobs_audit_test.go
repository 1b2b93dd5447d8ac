package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/store"
)

// A large job's item entries never push its own entries (pause, resume, …) out of the page.
func TestJobAuditOwnEntriesFirst(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	job := uuid.New()
	details := map[string]any{"job_id": job.String()}
	base := time.Now().Add(-time.Hour)
	var items []store.AuditEntry
	for range 5 {
		id := insertFixture(t, pool, fixtureRow{State: store.StatePermanent})
		items = append(items, store.AuditEntry{FailureID: &id, Action: "close", Principal: "bob", Details: details})
	}
	if err := s.AppendAudit(ctx, []store.AuditEntry{{Action: "job_start", Principal: "bob", Details: details}}, base); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(ctx, items, base.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(ctx, []store.AuditEntry{{Action: "job_pause", Principal: "ann", Details: details}}, base.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Another job's entry is not this job's.
	if err := s.AppendAudit(ctx, []store.AuditEntry{{Action: "job_start", Principal: "bob", Details: map[string]any{"job_id": uuid.NewString()}}}, base); err != nil {
		t.Fatal(err)
	}
	got, err := s.JobAudit(ctx, job, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Action != "job_start" || got[1].Action != "job_pause" || got[2].Action != "close" || got[2].FailureID == nil {
		t.Fatalf("job audit = %+v, want job_start, job_pause, then the first item", got)
	}
	if all, err := s.JobAudit(ctx, job, 100); err != nil || len(all) != 7 {
		t.Fatalf("whole job audit: %d entries (%v), want 7", len(all), err)
	}
}
