package operator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/store"
)

func newCore(t *testing.T, mod func(*operator.Config)) (*operator.Core, *store.Store) {
	t.Helper()
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	cfg := operator.Config{Store: s}
	if mod != nil {
		mod(&cfg)
	}
	c, err := operator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// The rules every client gets: one place refuses what the API and the UI must both refuse,
// before anything changes.
func TestActRefusals(t *testing.T) {
	t.Parallel()
	c, s := newCore(t, func(cfg *operator.Config) { cfg.MaxBulk = 2 })
	pool := s.Pool()
	for range 3 {
		testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "bulk"})
	}
	id := testkit.InsertFailure(t, pool, testkit.FailureRow{})
	ctx := context.Background()
	empty := redrive.Filter{}
	bulk := redrive.Filter{Topic: "bulk"}
	ids := func(n int) []uuid.UUID {
		out := make([]uuid.UUID, n)
		for i := range out {
			out[i] = uuid.New()
		}
		return out
	}
	for name, c2 := range map[string]struct {
		req   operator.ActionRequest
		field string
		unav  bool
	}{
		"empty filter":         {operator.ActionRequest{Action: operator.Close, Reason: "r", Selection: operator.Selection{Filter: &empty}}, "filter", false},
		"empty filter dry":     {operator.ActionRequest{Action: operator.Retry, DryRun: true, Selection: operator.Selection{Filter: &empty}}, "filter", false},
		"ids and filter":       {operator.ActionRequest{Action: operator.Close, Reason: "r", Selection: operator.Selection{IDs: []uuid.UUID{id}, Filter: &bulk}}, "filter", false},
		"nothing selected":     {operator.ActionRequest{Action: operator.Close, Reason: "r"}, "ids", false},
		"too many ids":         {operator.ActionRequest{Action: operator.Close, Reason: "r", Selection: operator.Selection{IDs: ids(operator.MaxIDs + 1)}}, "ids", false},
		"close without reason": {operator.ActionRequest{Action: operator.Close, Selection: operator.Selection{IDs: []uuid.UUID{id}}}, "reason", false},
		"reason too long":      {operator.ActionRequest{Action: operator.Close, Reason: string(make([]rune, operator.MaxReasonLen+1)), Selection: operator.Selection{IDs: []uuid.UUID{id}}}, "reason", false},
		"reason with NUL":      {operator.ActionRequest{Action: operator.Close, Reason: "a\x00b", Selection: operator.Selection{IDs: []uuid.UUID{id}}}, "reason", false},
		"unknown action":       {operator.ActionRequest{Action: "delete", Selection: operator.Selection{IDs: []uuid.UUID{id}}}, "action", false},
		"over the bulk cap":    {operator.ActionRequest{Action: operator.Close, Reason: "r", Selection: operator.Selection{Filter: &bulk}}, "filter", false},
		"retry, no resender":   {operator.ActionRequest{Action: operator.Retry, Selection: operator.Selection{IDs: []uuid.UUID{id}}}, "", true},
	} {
		c2.req.Principal = "alice"
		_, err := c.Act(ctx, c2.req)
		var ie *operator.InputError
		switch {
		case c2.unav && !errors.Is(err, redrive.ErrUnavailable):
			t.Errorf("%s: %v, want redrive.ErrUnavailable", name, err)
		case !c2.unav && (!errors.As(err, &ie) || ie.Field != c2.field):
			t.Errorf("%s: %v, want an input error on %s", name, err, c2.field)
		}
	}
	// A dry run over the cap still counts.
	res, err := c.Act(ctx, operator.ActionRequest{Action: operator.Close, DryRun: true, Principal: "alice", Selection: operator.Selection{Filter: &bulk}})
	if err != nil || res.Matched != 3 || res.Counts[redrive.OutcomeClosed] != 3 {
		t.Errorf("dry run over the cap = %+v, %v", res, err)
	}
	var audit int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit_log").Scan(&audit); err != nil || audit != 0 {
		t.Errorf("%d audit entries after refusals (%v), want none", audit, err)
	}
}

// Each item of an action names its state before and after.
func TestActBeforeAndAfter(t *testing.T) {
	t.Parallel()
	c, s := newCore(t, nil)
	pool := s.Pool()
	open := testkit.InsertFailure(t, pool, testkit.FailureRow{State: redrive.StateRetryPending})
	resent := testkit.InsertFailure(t, pool, testkit.FailureRow{State: redrive.StateResent})
	missing := uuid.New()
	req := operator.ActionRequest{Action: operator.Close, Principal: "alice", Reason: "noise",
		Selection: operator.Selection{IDs: []uuid.UUID{open, resent, missing, open}}}
	for _, dry := range []bool{true, false} {
		req.DryRun = dry
		res, err := c.Act(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := []operator.ItemOutcome{
			{ID: open, Outcome: redrive.OutcomeClosed, Before: redrive.StateRetryPending, After: redrive.StateClosed},
			{ID: resent, Outcome: redrive.OutcomeConflict, Before: redrive.StateResent, After: redrive.StateResent},
			{ID: missing, Outcome: redrive.OutcomeNotFound},
		}
		if res.Matched != 3 || len(res.Items) != 3 || res.Succeeded() {
			t.Fatalf("dry %v: %+v", dry, res)
		}
		for i, w := range want {
			got := res.Items[i]
			if got.ID != w.ID || got.Outcome != w.Outcome || got.Before != w.Before || got.After != w.After {
				t.Errorf("dry %v item %d = %+v, want %+v", dry, i, got, w)
			}
		}
	}
}

func TestUpdateGroupChangesOnlyWhatDiffers(t *testing.T) {
	t.Parallel()
	c, s := newCore(t, nil)
	pool := s.Pool()
	testkit.InsertFailure(t, pool, testkit.FailureRow{})
	var gid int64
	if err := pool.QueryRow(context.Background(), "SELECT min(id) FROM failure_groups").Scan(&gid); err != nil {
		t.Fatal(err)
	}
	ticket, same, blank := "OPS-1", "OPS-1", "  "
	ctx := context.Background()
	if g, err := c.UpdateGroup(ctx, gid, operator.GroupUpdate{Ticket: &ticket}, "alice"); err != nil || g.Ticket == nil || *g.Ticket != "OPS-1" {
		t.Fatalf("set ticket = %+v, %v", g, err)
	}
	if _, err := c.UpdateGroup(ctx, gid, operator.GroupUpdate{Ticket: &same}, "alice"); err != nil {
		t.Fatal(err)
	}
	if g, err := c.UpdateGroup(ctx, gid, operator.GroupUpdate{Ticket: &blank}, "alice"); err != nil || g.Ticket != nil {
		t.Fatalf("clear ticket = %+v, %v", g, err)
	}
	v, err := c.Group(ctx, gid)
	if err != nil || len(v.Audit) != 2 {
		t.Errorf("group audit = %d entries (%v), want 2: an edit that changes nothing is not audited", len(v.Audit), err)
	}
	if _, err := c.UpdateGroup(ctx, gid+1000, operator.GroupUpdate{Ticket: &ticket}, "alice"); !errors.Is(err, redrive.ErrNotFound) {
		t.Errorf("unknown group = %v", err)
	}
	long := string(make([]byte, redrive.MaxTicketLen+1))
	if _, err := c.UpdateGroup(ctx, gid, operator.GroupUpdate{Ticket: &long}, "alice"); err == nil {
		t.Error("an over-long ticket was accepted")
	}
}
