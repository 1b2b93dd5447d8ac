package api_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
)

// Malformed requests get a 4xx problem document naming what is wrong, and change nothing.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	permanent := e.insert(row{})
	closed := e.insert(row{State: redrive.StateClosed})
	var groupID int64
	e.pool.QueryRow(t.Context(), "SELECT min(id) FROM failure_groups").Scan(&groupID)
	f := "/api/v1/failures/" + permanent.String()
	g := fmt.Sprintf("/api/v1/groups/%d", groupID)

	// A cursor for the other sort order, and cursors that decode but are not ours.
	newest := e.list("limit=1")
	if newest.NextCursor == nil {
		e.insert(row{})
		newest = e.list("limit=1")
	}
	raw := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	badCursorTime := make([]byte, 26)
	badCursorTime[0], badCursorTime[1] = 1, 'n'
	for i := 2; i < 10; i++ {
		badCursorTime[i] = 0x7f
	}

	hugeIDs := make([]string, 1001)
	for i := range hugeIDs {
		hugeIDs[i] = uuid.NewString()
	}
	bigBody := `{"reason": "` + strings.Repeat("a", 2<<20) + `"}`
	bigIDs := `{"ids": [` + strings.Repeat(`"`+uuid.NewString()+`",`, 40000) + `"x"]}`

	type req struct {
		method, path string
		body         any
		status       int
		field        string
		ct           string // Content-Type override
	}
	cases := []req{
		// list: filters, paging
		{"GET", "/api/v1/failures?state=OPEN", nil, 400, "state", ""},
		{"GET", "/api/v1/failures?state=" + url.QueryEscape("' OR 1=1 --"), nil, 400, "state", ""},
		{"GET", "/api/v1/failures?temporality=SOMETIMES", nil, 400, "temporality", ""},
		{"GET", "/api/v1/failures?limit=0", nil, 400, "limit", ""},
		{"GET", "/api/v1/failures?limit=501", nil, 400, "limit", ""},
		{"GET", "/api/v1/failures?limit=ten", nil, 400, "limit", ""},
		{"GET", "/api/v1/failures?limit=-1", nil, 400, "limit", ""},
		{"GET", "/api/v1/failures?limit=1e3", nil, 400, "limit", ""},
		{"GET", "/api/v1/failures?cursor=garbage!", nil, 400, "cursor", ""},
		{"GET", "/api/v1/failures?cursor=" + raw([]byte("too short")), nil, 400, "cursor", ""},
		{"GET", "/api/v1/failures?cursor=" + raw(make([]byte, 26)), nil, 400, "cursor", ""},
		{"GET", "/api/v1/failures?cursor=" + raw(badCursorTime), nil, 400, "cursor", ""},
		{"GET", "/api/v1/failures?sort=oldest&cursor=" + *newest.NextCursor, nil, 400, "cursor", ""},
		{"GET", "/api/v1/failures?cursor=" + url.QueryEscape("'; DELETE FROM failures; --"), nil, 400, "cursor", ""},
		{"GET", "/api/v1/failures?group_id=abc", nil, 400, "group_id", ""},
		{"GET", "/api/v1/failures?group_id=-5", nil, 400, "group_id", ""},
		{"GET", "/api/v1/failures?group_id=1%20OR%201=1", nil, 400, "group_id", ""},
		{"GET", "/api/v1/failures?created_from=yesterday", nil, 400, "created_from", ""},
		{"GET", "/api/v1/failures?created_to=2024-13-01T00:00:00Z", nil, 400, "created_to", ""},
		{"GET", "/api/v1/failures?created_from=2024-06-02T00:00:00Z&created_to=2024-06-01T00:00:00Z", nil, 400, "created_to", ""},
		{"GET", "/api/v1/failures?key=a&key_base64=YQ==", nil, 400, "key_base64", ""},
		{"GET", "/api/v1/failures?key_base64=" + url.QueryEscape("!!not base64!!"), nil, 400, "key_base64", ""},
		{"GET", "/api/v1/failures?sort=sideways", nil, 400, "sort", ""},
		{"GET", "/api/v1/failures?sort=newest;DROP", nil, 400, "query", ""},
		{"GET", "/api/v1/failures?stat=PERMANENT", nil, 400, "stat", ""},
		{"GET", "/api/v1/failures?topic=a&topic=b", nil, 400, "topic", ""},
		{"GET", "/api/v1/failures?q=" + strings.Repeat("x", redrive.MaxSearchLen+1), nil, 400, "q", ""},
		{"GET", "/api/v1/failures?q=a%00b", nil, 400, "q", ""},
		{"GET", "/api/v1/failures?topic=%ff%fe", nil, 400, "topic", ""},
		// detail and payload
		{"GET", "/api/v1/failures/not-a-uuid", nil, 400, "id", ""},
		{"GET", "/api/v1/failures/" + url.PathEscape("' OR '1'='1"), nil, 400, "id", ""},
		{"GET", "/api/v1/failures/" + permanent.String()[:35], nil, 400, "id", ""},
		{"GET", "/api/v1/failures/" + strings.ReplaceAll(permanent.String(), "-", ""), nil, 400, "id", ""},
		{"GET", f + "?verbose=1", nil, 400, "verbose", ""},
		{"GET", "/api/v1/failures/" + uuid.NewString(), nil, 404, "", ""},
		{"GET", f + "/payload?part=body", nil, 400, "part", ""},
		{"GET", f + "/payload?format=xml", nil, 400, "format", ""},
		{"GET", f + "/payload?format=raw&format=hex", nil, 400, "format", ""},
		{"GET", f + "/payload?format=avro", nil, 422, "format", ""},
		// single actions
		{"POST", f + "/close", nil, 400, "body", ""},
		{"POST", f + "/close", `{}`, 400, "reason", ""},
		{"POST", f + "/close", `{"reason": "   "}`, 400, "reason", ""},
		{"POST", f + "/close", `{"reason": 42}`, 400, "reason", ""},
		{"POST", f + "/close", `{"reason": ["a"]}`, 400, "reason", ""},
		{"POST", f + "/close", map[string]string{"reason": strings.Repeat("ä", 1001)}, 400, "reason", ""},
		{"POST", f + "/close", `{"reason": "ok", "force": true}`, 400, "force", ""},
		{"POST", f + "/close", `{"reason": "ok"`, 400, "body", ""},
		{"POST", f + "/close", `{"reason": "ok"} {"reason": "again"}`, 400, "body", ""},
		{"POST", f + "/close", `["reason"]`, 400, "body", ""},
		{"POST", f + "/close", `{"reason": "a\u0000b"}`, 400, "reason", ""},
		{"POST", f + "/close", `reason=ok`, 400, "body", ""},
		{"POST", f + "/close", `{"reason": "ok"}`, 415, "Content-Type", "text/plain"},
		{"POST", f + "/close", bigBody, 413, "body", ""},
		{"POST", "/api/v1/failures/" + closed.String() + "/close", `{"reason": "again"}`, 409, "", ""},
		{"POST", "/api/v1/failures/" + uuid.NewString() + "/close", `{"reason": "x"}`, 404, "id", ""},
		{"POST", "/api/v1/failures/nope/close", `{"reason": "x"}`, 400, "id", ""},
		{"POST", f + "/retry", `{"reason": 1}`, 400, "reason", ""},
		{"POST", f + "/retry", `{"why": "x"}`, 400, "why", ""},
		// bulk actions
		{"POST", "/api/v1/failures/retry", `{}`, 400, "ids", ""},
		{"POST", "/api/v1/failures/retry", `null`, 400, "ids", ""},
		{"POST", "/api/v1/failures/retry", `{"ids": []}`, 400, "ids", ""},
		{"POST", "/api/v1/failures/retry", `{"ids": "` + permanent.String() + `"}`, 400, "ids", ""},
		{"POST", "/api/v1/failures/retry", `{"ids": [42]}`, 400, "ids[0]", ""},
		{"POST", "/api/v1/failures/retry", `{"ids": ["` + permanent.String() + `", "x' OR 1=1"]}`, 400, "ids[1]", ""},
		{"POST", "/api/v1/failures/retry", map[string]any{"ids": hugeIDs}, 400, "ids", ""},
		{"POST", "/api/v1/failures/retry", bigIDs, 413, "body", ""},
		{"POST", "/api/v1/failures/retry", `{"ids": ["` + permanent.String() + `"], "filter": {"topic": "orders"}}`, 400, "filter", ""},
		{"POST", "/api/v1/failures/retry", `{"filter": {}}`, 400, "filter", ""},
		{"POST", "/api/v1/failures/retry", `{"filter": {"topik": "orders"}}`, 400, "filter.topik", ""},
		// member names match exactly and once: no case folding, no last-one-wins
		{"POST", "/api/v1/failures/close", `{"ids": ["` + permanent.String() + `"], "dry_run": true, "Dry_Run": false, "reason": "x"}`, 400, "Dry_Run", ""},
		{"POST", "/api/v1/failures/close", `{"ids": ["` + permanent.String() + `"], "dry_run": true, "dry_run": false, "reason": "x"}`, 400, "dry_run", ""},
		{"POST", "/api/v1/failures/close", `{"IDS": ["` + permanent.String() + `"], "reason": "x"}`, 400, "IDS", ""},
		{"POST", "/api/v1/failures/close", `{"filter": {"topic": "orders", "topic": "x"}, "reason": "x"}`, 400, "filter.topic", ""},
		{"POST", f + "/close", `{"Reason": "ok"}`, 400, "Reason", ""},
		{"POST", f + "/close", `{"reason": "ok", "reason": "again"}`, 400, "reason", ""},
		{"PATCH", g, `{"note": "a", "Note": "b"}`, 400, "Note", ""},
		{"POST", f + "/close", "{\"reason\": \"\xff\"}", 400, "reason", ""},
		{"POST", "/api/v1/failures/retry", `{"filter": {"state": "DONE"}}`, 400, "state", ""},
		{"POST", "/api/v1/failures/retry", `{"filter": {"state": 3}}`, 400, "filter.state", ""},
		{"POST", "/api/v1/failures/retry", `{"filter": {"group_id": "7"}}`, 400, "filter.group_id", ""},
		{"POST", "/api/v1/failures/retry", `{"filter": {"group_id": 0}}`, 400, "group_id", ""},
		{"POST", "/api/v1/failures/retry", `{"filter": {"created_from": "now"}}`, 400, "created_from", ""},
		{"POST", "/api/v1/failures/retry", `{"filter": "topic=orders"}`, 400, "filter", ""},
		{"POST", "/api/v1/failures/retry", `{"filter": {"topic": "orders"}, "dry_run": "yes"}`, 400, "dry_run", ""},
		{"POST", "/api/v1/failures/close", `{"ids": ["` + permanent.String() + `"]}`, 400, "reason", ""},
		{"POST", "/api/v1/failures/close", `{"ids": ["` + permanent.String() + `"], "reason": "x", "extra": 1}`, 400, "extra", ""},
		{"POST", "/api/v1/failures/close?dry_run=true", `{"ids": ["` + permanent.String() + `"], "reason": "x"}`, 400, "dry_run", ""},
		// groups and stats
		{"GET", "/api/v1/groups?open=maybe", nil, 400, "open", ""},
		{"GET", "/api/v1/groups?cursor=xyz", nil, 400, "cursor", ""},
		{"GET", "/api/v1/groups?limit=100000", nil, 400, "limit", ""},
		{"GET", "/api/v1/groups?state=PERMANENT", nil, 400, "state", ""},
		{"GET", "/api/v1/groups/abc", nil, 400, "id", ""},
		{"GET", "/api/v1/groups/-1", nil, 400, "id", ""},
		{"PATCH", g, `{}`, 400, "body", ""},
		{"PATCH", g, `{"ticket": 5}`, 400, "ticket", ""},
		{"PATCH", g, `{"ticket": "` + strings.Repeat("t", 201) + `"}`, 400, "ticket", ""},
		{"PATCH", g, `{"note": "` + strings.Repeat("n", 10001) + `"}`, 400, "note", ""},
		{"PATCH", g, `{"owner": "me"}`, 400, "owner", ""},
		{"PATCH", "/api/v1/groups/999999", `{"note": "x"}`, 404, "", ""},
		{"PATCH", "/api/v1/groups/1;DROP", `{"note": "x"}`, 400, "id", ""},
		{"GET", "/api/v1/stats?by=topic", nil, 400, "by", ""},
		// routes and methods
		{"DELETE", f, nil, 405, "", ""},
		{"PUT", "/api/v1/failures", `{}`, 405, "", ""},
		{"GET", "/api/v1/nothing", nil, 404, "", ""},
		{"GET", "/api/v2/failures", nil, 404, "", ""},
	}
	if len(cases) < 50 {
		t.Fatalf("only %d malformed requests", len(cases))
	}
	before := e.checksum()
	for _, c := range cases {
		r := doRequest(t, e.handler, c.method, c.path, adminToken, c.body, func(r *http.Request) {
			if c.ct != "" {
				r.Header.Set("Content-Type", c.ct)
			}
		})
		name := c.method + " " + truncateName(c.path)
		if r.status != c.status {
			t.Errorf("%s: status %d, want %d: %s", name, r.status, c.status, truncateName(string(r.body)))
			continue
		}
		p := r.problem(t)
		if p.Field != c.field {
			t.Errorf("%s: field %q, want %q (%s)", name, p.Field, c.field, p.Detail)
		}
		if c.field != "" && !strings.Contains(p.Detail, c.field) {
			t.Errorf("%s: detail %q does not name %q", name, p.Detail, c.field)
		}
	}
	if after := e.checksum(); after != before {
		t.Errorf("malformed requests changed the database")
	}
}

func truncateName(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
