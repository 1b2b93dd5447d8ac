package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"
)

type groupView struct {
	ID               int64     `json:"id"`
	PublisherService string    `json:"publisher_service"`
	Ticket           *string   `json:"ticket"`
	Note             *string   `json:"note"`
	FirstSeen        time.Time `json:"first_seen"`
	LastSeen         time.Time `json:"last_seen"`
	OpenCount        int64     `json:"open_count"`
	TotalCount       int64     `json:"total_count"`
}

func TestGroups(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, r := range []row{
		{PublisherService: "a"}, {PublisherService: "a", State: redrive.StateRetryPending}, {PublisherService: "a", State: redrive.StateClosed},
		{PublisherService: "b", State: redrive.StateResent}, {PublisherService: "c", ErrorCode: "TIMEOUT"},
	} {
		e.insert(r)
	}
	if _, err := e.pool.Exec(context.Background(), `UPDATE failure_groups SET last_seen = now() - (ascii('z') - ascii(publisher_service)) * interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	var all []groupView
	cursor := ""
	for {
		r := e.do("GET", "/api/v1/groups?limit=1"+cursor, viewerToken, nil)
		var p struct {
			Data       []groupView `json:"data"`
			NextCursor *string     `json:"next_cursor"`
		}
		r.json(t, &p)
		all = append(all, p.Data...)
		if p.NextCursor == nil {
			break
		}
		cursor = "&cursor=" + *p.NextCursor
	}
	if len(all) != 3 || all[0].PublisherService != "c" || all[2].PublisherService != "a" || all[2].OpenCount != 2 || all[2].TotalCount != 3 {
		t.Fatalf("groups = %+v", all)
	}
	for query, want := range map[string]int{"open=true": 2, "open=false": 3, "publisher_service=b": 1, "error_code=TIMEOUT": 1, "message_type=Nope": 0} {
		r := e.do("GET", "/api/v1/groups?"+query, viewerToken, nil)
		var p struct{ Data []groupView }
		r.json(t, &p)
		if r.status != 200 || len(p.Data) != want {
			t.Errorf("?%s: %d groups (%d), want %d", query, len(p.Data), r.status, want)
		}
	}

	a := all[2].ID
	path := fmt.Sprintf("/api/v1/groups/%d", a)
	r := e.do("PATCH", path, operatorToken, `{"ticket": "OPS-42", "note": "schema v3 rollout"}`)
	var g groupView
	r.json(t, &g)
	if r.status != 200 || *g.Ticket != "OPS-42" || *g.Note != "schema v3 rollout" || g.OpenCount != 2 {
		t.Fatalf("PATCH = %d %s", r.status, r.body)
	}
	if r = e.do("GET", "/api/v1/groups?ticket=OPS-42", viewerToken, nil); !strings.Contains(string(r.body), `"OPS-42"`) {
		t.Errorf("ticket filter: %s", r.body)
	}
	r = e.do("PATCH", path, operatorToken, `{"ticket": null}`)
	g = groupView{}
	r.json(t, &g)
	if r.status != 200 || g.Ticket != nil || *g.Note != "schema v3 rollout" {
		t.Errorf("PATCH ticket null = %d %s", r.status, r.body)
	}
	r = e.do("GET", path, viewerToken, nil)
	var d struct {
		groupView
		Audit []struct {
			Action    string         `json:"action"`
			Principal string         `json:"principal"`
			Details   map[string]any `json:"details"`
		} `json:"audit"`
	}
	r.json(t, &d)
	if r.status != 200 || d.ID != a || len(d.Audit) != 2 || d.Audit[0].Action != "group_update" || d.Audit[1].Principal != "token:otto" {
		t.Errorf("GET group = %d %s", r.status, r.body)
	}
	if r = e.do("PATCH", "/api/v1/groups/999999", operatorToken, `{"note": "x"}`); r.status != 404 {
		t.Errorf("PATCH unknown = %d", r.status)
	}
	if r = e.do("GET", "/api/v1/groups/999999", viewerToken, nil); r.status != 404 {
		t.Errorf("GET unknown group = %d", r.status)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	old := time.Now().Add(-2 * time.Hour).Truncate(time.Microsecond)
	e.insert(row{State: redrive.StateRetryPending, Topic: "a", CreatedAt: old})
	e.insert(row{State: redrive.StateRetryPending, Topic: "b", PublisherService: "s2"})
	e.insert(row{State: redrive.StateClosed, Topic: "b"})
	r := e.do("GET", "/api/v1/stats", viewerToken, nil)
	var st struct {
		AsOf               time.Time        `json:"as_of"`
		Total              int64            `json:"total"`
		ByState            map[string]int64 `json:"by_state"`
		ByTemporality      map[string]int64 `json:"by_temporality"`
		ByTopic            map[string]int64 `json:"by_topic"`
		ByPublisherService map[string]int64 `json:"by_publisher_service"`
		OldestPending      *struct {
			CreatedAt  time.Time `json:"created_at"`
			AgeSeconds float64   `json:"age_seconds"`
		} `json:"oldest_pending"`
		OldestPermanent *struct{} `json:"oldest_permanent"`
	}
	r.json(t, &st)
	if r.status != 200 || st.Total != 3 || st.ByState["RETRY_PENDING"] != 2 || st.ByState["RESENT"] != 0 || st.ByState["CLOSED"] != 1 ||
		st.ByTemporality["PERMANENT"] != 3 || st.ByTopic["b"] != 2 || st.ByPublisherService["order-service"] != 2 || st.ByPublisherService["s2"] != 1 {
		t.Errorf("stats = %d %s", r.status, r.body)
	}
	if st.OldestPending == nil || !st.OldestPending.CreatedAt.Equal(old) || st.OldestPending.AgeSeconds < 7000 || st.OldestPermanent != nil {
		t.Errorf("oldest = %s", r.body)
	}
}
