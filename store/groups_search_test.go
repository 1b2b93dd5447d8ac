package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/store"
)

func searchGroups(t *testing.T, s *store.Store, f store.GroupSearch) []store.GroupSummary {
	t.Helper()
	var (
		out   []store.GroupSummary
		after *store.GroupPosition
	)
	for {
		gs, more, err := s.SearchGroups(context.Background(), store.GroupSearchParams{Search: f, After: after, Limit: 2})
		if err != nil {
			t.Fatalf("SearchGroups: %v", err)
		}
		out = append(out, gs...)
		if !more {
			return out
		}
		p := gs[len(gs)-1].Position()
		after = &p
	}
}

func TestSearchGroupsSampleTicketAndLastSeen(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i, r := range []fixtureRow{
		{PublisherService: "a", ErrorMessage: "old message", State: store.StateClosed},
		{PublisherService: "a", ErrorMessage: "newest message of a", State: store.StateClosed},
		{PublisherService: "b", ErrorMessage: "message of b"},
		{PublisherService: "c", ErrorMessage: "message of c", State: store.StateResent},
	} {
		r.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		insertFixture(t, pool, r)
	}
	// last_seen: a at base, b at base+10m, c at base+20m; b has a ticket.
	if _, err := pool.Exec(ctx, `UPDATE failure_groups SET last_seen = $1::timestamptz + (ascii(publisher_service) - ascii('a')) * interval '10 minutes',
		ticket = CASE WHEN publisher_service = 'b' THEN 'OPS-1' END`, base); err != nil {
		t.Fatal(err)
	}
	names := func(gs []store.GroupSummary) string {
		var out string
		for _, g := range gs {
			out += g.PublisherService
		}
		return out
	}
	all := searchGroups(t, s, store.GroupSearch{})
	if names(all) != "cba" {
		t.Fatalf("order = %q, want cba", names(all))
	}
	if all[2].SampleMessage != "newest message of a" || all[0].SampleMessage != "message of c" {
		t.Errorf("samples = %q, %q", all[2].SampleMessage, all[0].SampleMessage)
	}
	for name, c := range map[string]struct {
		f    store.GroupSearch
		want string
	}{
		"no ticket":        {store.GroupSearch{NoTicket: true}, "ca"},
		"ticket":           {store.GroupSearch{GroupFilter: store.GroupFilter{Ticket: "OPS-1"}}, "b"},
		"last seen from":   {store.GroupSearch{LastSeenFrom: base.Add(10 * time.Minute)}, "cb"},
		"last seen to":     {store.GroupSearch{LastSeenTo: base.Add(10 * time.Minute)}, "a"},
		"range":            {store.GroupSearch{LastSeenFrom: base.Add(5 * time.Minute), LastSeenTo: base.Add(15 * time.Minute)}, "b"},
		"open":             {store.GroupSearch{GroupFilter: store.GroupFilter{OpenOnly: true}}, "b"},
		"open, no ticket":  {store.GroupSearch{GroupFilter: store.GroupFilter{OpenOnly: true}, NoTicket: true}, ""},
		"service and code": {store.GroupSearch{GroupFilter: store.GroupFilter{PublisherService: "c", ErrorCode: "DESERIALIZATION_FAILED"}}, "c"},
	} {
		if got := names(searchGroups(t, s, c.f)); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
	// A group whose failures are gone has no sample.
	if _, err := pool.Exec(ctx, `DELETE FROM failures WHERE publisher_service = 'c'`); err != nil {
		t.Fatal(err)
	}
	if gs := searchGroups(t, s, store.GroupSearch{GroupFilter: store.GroupFilter{PublisherService: "c"}}); len(gs) != 1 || gs[0].SampleMessage != "" || gs[0].TotalCount != 0 {
		t.Errorf("group without failures = %+v", gs)
	}
}

func TestSearchGroupsRefusesBadInput(t *testing.T) {
	t.Parallel()
	s, _ := fixtureStore(t)
	now := time.Now()
	for name, p := range map[string]store.GroupSearchParams{
		"limit":             {Limit: 0},
		"ticket, no ticket": {Limit: 1, Search: store.GroupSearch{GroupFilter: store.GroupFilter{Ticket: "x"}, NoTicket: true}},
		"empty range":       {Limit: 1, Search: store.GroupSearch{LastSeenFrom: now, LastSeenTo: now}},
		"not UTF-8":         {Limit: 1, Search: store.GroupSearch{GroupFilter: store.GroupFilter{ErrorCode: "\xff"}}},
		"NUL":               {Limit: 1, Search: store.GroupSearch{GroupFilter: store.GroupFilter{PublisherService: "a\x00"}}},
	} {
		var fe *store.FilterError
		if _, _, err := s.SearchGroups(context.Background(), p); !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a FilterError", name, err)
		}
	}
}
