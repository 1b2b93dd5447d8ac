package operator_test

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/operator"
)

func TestParseGroupSearchRoundTrip(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := redrive.GroupSearch{GroupFilter: redrive.GroupFilter{PublisherService: "billing", ErrorCode: "TIMEOUT", OpenOnly: true},
		NoTicket: true, LastSeenFrom: from, LastSeenTo: from.Add(time.Hour)}
	got, err := operator.ParseGroupSearch(operator.GroupSearchValues(s))
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, s)
	}
	for name, v := range map[string]url.Values{
		"no_ticket":      {operator.ParamNoTicket: {"maybe"}},
		"open":           {operator.ParamOpen: {"maybe"}},
		"last_seen_from": {operator.ParamLastSeenFrom: {"yesterday"}},
		"last_seen_to":   {operator.ParamLastSeenFrom: {"2026-05-01T12:00"}, operator.ParamLastSeenTo: {"2026-05-01T11:00"}},
		"ticket":         {operator.ParamTicket: {"T-1"}, operator.ParamNoTicket: {"true"}},
	} {
		var ie *operator.InputError
		if _, err := operator.ParseGroupSearch(v); !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an InputError", name, err)
		} else if ie.Field != name && !(name == "ticket" && ie.Field == operator.ParamNoTicket) {
			t.Errorf("%s: the error names %q", name, ie.Field)
		}
	}
}

func TestSearchGroupsAndGroupPage(t *testing.T) {
	t.Parallel()
	c, s := newCore(t, nil)
	pool := s.Pool()
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var groupID int64
	for i := range 3 {
		id := testkit.InsertFailure(t, pool, testkit.FailureRow{PublisherService: "billing", ErrorMessage: "message " + string(rune('a'+i)),
			CreatedAt: base.Add(time.Duration(i) * time.Minute)})
		if err := pool.QueryRow(ctx, `SELECT group_id FROM failures WHERE id = $1`, id).Scan(&groupID); err != nil {
			t.Fatal(err)
		}
	}
	testkit.InsertFailure(t, pool, testkit.FailureRow{PublisherService: "shipping"})

	page, err := c.SearchGroups(ctx, operator.GroupSearchRequest{Search: redrive.GroupSearch{GroupFilter: redrive.GroupFilter{PublisherService: "billing"}}})
	if err != nil || len(page.Items) != 1 || page.Items[0].SampleMessage != "message c" || page.Items[0].TotalCount != 3 {
		t.Fatalf("search = %+v, %v", page, err)
	}
	all, err := c.SearchGroups(ctx, operator.GroupSearchRequest{Limit: 1})
	if err != nil || len(all.Items) != 1 || all.Next == "" {
		t.Fatalf("first page = %+v, %v", all, err)
	}
	next, err := c.SearchGroups(ctx, operator.GroupSearchRequest{Limit: 1, Cursor: all.Next})
	if err != nil || len(next.Items) != 1 || next.Next != "" || next.Items[0].ID == all.Items[0].ID {
		t.Fatalf("second page = %+v, %v", next, err)
	}
	var ie *operator.InputError
	if _, err := c.SearchGroups(ctx, operator.GroupSearchRequest{Cursor: "nope"}); !errors.As(err, &ie) {
		t.Errorf("bad cursor: %v", err)
	}

	gp, err := c.GroupPage(ctx, operator.GroupPageRequest{ID: groupID, Limit: 2, Total: true})
	if err != nil || gp.ID != groupID || len(gp.Failures.Items) != 2 || gp.Failures.Next == "" || *gp.Failures.Total != 3 {
		t.Fatalf("group page = %+v, %v", gp, err)
	}
	if gp.Failures.Items[0].ErrorMessage != "message c" {
		t.Errorf("newest first: %q", gp.Failures.Items[0].ErrorMessage)
	}
	rest, err := c.GroupPage(ctx, operator.GroupPageRequest{ID: groupID, Limit: 2, Cursor: gp.Failures.Next})
	if err != nil || len(rest.Failures.Items) != 1 || rest.Failures.Items[0].ErrorMessage != "message a" {
		t.Fatalf("group page 2 = %+v, %v", rest, err)
	}
	if _, err := c.GroupPage(ctx, operator.GroupPageRequest{ID: groupID + 100}); !errors.Is(err, redrive.ErrNotFound) {
		t.Errorf("unknown group: %v", err)
	}
}
