package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redrive/redrive/store"
)

func groupOf(t *testing.T, s *store.Store, f store.GroupFilter) []store.Group {
	t.Helper()
	var (
		out   []store.Group
		after *store.GroupPosition
	)
	for {
		gs, more, err := s.ListGroups(context.Background(), store.GroupListParams{Filter: f, After: after, Limit: 2})
		if err != nil {
			t.Fatalf("ListGroups: %v", err)
		}
		out = append(out, gs...)
		if !more {
			return out
		}
		p := gs[len(gs)-1].Position()
		after = &p
	}
}

func TestListGroupsCountsAndFilters(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	for _, r := range []fixtureRow{
		{PublisherService: "a", State: store.StatePermanent},
		{PublisherService: "a", State: store.StateRetryPending},
		{PublisherService: "a", State: store.StateClosed},
		{PublisherService: "b", State: store.StateResent},
		{PublisherService: "c", ErrorCode: "X"},
		{PublisherService: "d"},
		{PublisherService: "e"},
	} {
		insertFixture(t, pool, r)
	}
	// last_seen decides the order: e newest, a oldest.
	if _, err := pool.Exec(ctx, `UPDATE failure_groups SET last_seen = now() - (ascii('z') - ascii(publisher_service)) * interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	all := groupOf(t, s, store.GroupFilter{})
	var order string
	for _, g := range all {
		order += g.PublisherService
	}
	if order != "edcba" {
		t.Errorf("group order = %q, want edcba", order)
	}
	a := all[4]
	if a.OpenCount != 2 || a.TotalCount != 3 || a.ErrorCode != "DESERIALIZATION_FAILED" || a.MessageType != "OrderCreated" {
		t.Errorf("group a = %+v", a)
	}
	if gs := groupOf(t, s, store.GroupFilter{OpenOnly: true}); len(gs) != 4 {
		t.Errorf("open groups = %d, want 4 (not b)", len(gs))
	}
	if gs := groupOf(t, s, store.GroupFilter{ErrorCode: "X"}); len(gs) != 1 || gs[0].PublisherService != "c" {
		t.Errorf("groups with error code X = %+v", gs)
	}
	if gs := groupOf(t, s, store.GroupFilter{PublisherService: "b"}); len(gs) != 1 || gs[0].OpenCount != 0 || gs[0].TotalCount != 1 {
		t.Errorf("groups of b = %+v", gs)
	}
	if _, _, err := s.ListGroups(ctx, store.GroupListParams{Limit: 0}); err == nil {
		t.Error("ListGroups with limit 0 succeeded")
	}
}

func TestUpdateGroup(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	insertFixture(t, pool, fixtureRow{})
	var id int64
	if err := pool.QueryRow(ctx, `SELECT id FROM failure_groups`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	ticket, note := "OPS-17", "upstream schema change"
	g, err := s.UpdateGroup(ctx, id, store.GroupPatch{SetTicket: true, Ticket: &ticket, SetNote: true, Note: &note}, "carol")
	if err != nil || *g.Ticket != ticket || *g.Note != note || g.TotalCount != 1 {
		t.Fatalf("UpdateGroup = %+v, %v", g, err)
	}
	// Only the note changes; then the ticket is cleared.
	note2 := "fixed in 2.3"
	if g, err = s.UpdateGroup(ctx, id, store.GroupPatch{SetNote: true, Note: &note2}, "carol"); err != nil || *g.Ticket != ticket || *g.Note != note2 {
		t.Fatalf("UpdateGroup(note) = %+v, %v", g, err)
	}
	if g, err = s.UpdateGroup(ctx, id, store.GroupPatch{SetTicket: true}, "dave"); err != nil || g.Ticket != nil || *g.Note != note2 {
		t.Fatalf("UpdateGroup(clear ticket) = %+v, %v", g, err)
	}
	audit, err := s.GroupAudit(ctx, id, 10)
	if err != nil || len(audit) != 3 {
		t.Fatalf("GroupAudit = %v, %v", audit, err)
	}
	if e := audit[2]; e.Principal != "dave" || e.Action != store.AuditActionGroupUpdate || *e.GroupID != id ||
		e.Details["ticket"].(map[string]any)["from"] != ticket || e.Details["ticket"].(map[string]any)["to"] != nil {
		t.Errorf("last audit entry = %+v", e)
	}
	if _, ok := audit[1].Details["ticket"]; ok {
		t.Errorf("a note-only update recorded a ticket change: %+v", audit[1].Details)
	}
	if _, err := s.UpdateGroup(ctx, id+1000, store.GroupPatch{SetNote: true}, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateGroup(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.GroupByID(ctx, id+1000); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GroupByID(unknown) = %v, want ErrNotFound", err)
	}
}
