package api_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/google/uuid"

	"github.com/redrive/redrive/avro/confluentsr"
	"github.com/redrive/redrive/internal/testkit/storekit"
	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/payload"
)

type jobView struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Total     int64  `json:"total"`
	Done      int64  `json:"done"`
	Skipped   int64  `json:"skipped"`
	Remaining int64  `json:"remaining"`
}

// A job by filter: previewed, started with its token, run in the background, inspected.
func TestJobsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for range 4 {
		e.insert(row{Topic: "billing"})
	}
	r := e.do("POST", "/api/v1/jobs", operatorToken, map[string]any{"action": "close", "filter": map[string]any{"topic": "billing"}, "reason": "outage"})
	var preview struct {
		Job   jobView `json:"job"`
		Token string  `json:"token"`
	}
	r.json(t, &preview)
	if r.status != 201 || preview.Job.State != "PREVIEW" || preview.Job.Total != 4 || preview.Token == "" || r.header.Get("Location") == "" {
		t.Fatalf("preview = %d %s", r.status, r.body)
	}
	late := e.insert(row{Topic: "billing"})
	path := "/api/v1/jobs/" + preview.Job.ID
	for _, bad := range []string{`{"token": "x"}`, `{"token": "` + strings.Repeat("A", 43) + `"}`, `{}`, `{"token": "` + preview.Token + `", "Token": "y"}`} {
		if r := e.do("POST", path+"/start", operatorToken, bad); r.status != 400 {
			t.Errorf("start with %s = %d %s", bad, r.status, r.body)
		}
	}
	if r := e.do("POST", path+"/start", viewerToken, `{"token": "`+preview.Token+`"}`); r.status != 403 {
		t.Errorf("start as viewer = %d", r.status)
	}
	if r := e.do("POST", path+"/start", operatorToken, `{"token": "`+preview.Token+`"}`); r.status != 200 {
		t.Fatalf("start = %d %s", r.status, r.body)
	}
	if r := e.do("POST", path+"/start", operatorToken, `{"token": "`+preview.Token+`"}`); r.status != 409 {
		t.Errorf("start again = %d %s", r.status, r.body)
	}
	var pub jobs.Publisher
	if e.resender != nil {
		pub = e.resender
	}
	runner, err := jobs.New(jobs.Config{Store: e.store, Publisher: pub, Owner: "test", PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(time.Minute)
	var j jobView
	for {
		r := e.do("GET", path, viewerToken, nil)
		r.json(t, &j)
		if j.State == "DONE" || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if j.State != "DONE" || j.Done != 4 || j.Remaining != 0 {
		t.Fatalf("job = %+v", j)
	}
	if e.state(late) != redrive.StatePermanent {
		t.Error("a failure stored after the preview was closed")
	}
	r = e.do("GET", path+"/items?outcome=done&limit=2", viewerToken, nil)
	var items struct {
		Data []struct {
			Seq     int64   `json:"seq"`
			Outcome *string `json:"outcome"`
		} `json:"data"`
		Next *string `json:"next_cursor"`
	}
	r.json(t, &items)
	if r.status != 200 || len(items.Data) != 2 || items.Next == nil || *items.Data[0].Outcome != "done" {
		t.Errorf("items = %d %s", r.status, r.body)
	}
	r = e.do("GET", path+"/items?cursor="+*items.Next, viewerToken, nil)
	r.json(t, &items)
	if len(items.Data) != 2 || items.Data[0].Seq != 3 {
		t.Errorf("items page 2 = %s", r.body)
	}
	// The job's whole audit, a page at a time: its preview and start, and a close per item.
	var audit []string
	cursor := ""
	for pages := 0; ; pages++ {
		r := e.do("GET", path+"/audit?limit=2"+cursor, viewerToken, nil)
		var p struct {
			Data []struct {
				ID        int64   `json:"id"`
				Action    string  `json:"action"`
				FailureID *string `json:"failure_id"`
			} `json:"data"`
			Next *string `json:"next_cursor"`
		}
		r.json(t, &p)
		if r.status != 200 || len(p.Data) > 2 || pages > 10 {
			t.Fatalf("audit page %d = %d %s", pages, r.status, r.body)
		}
		for _, a := range p.Data {
			audit = append(audit, a.Action)
		}
		if p.Next == nil {
			break
		}
		cursor = "&cursor=" + *p.Next
	}
	if closes := strings.Count(strings.Join(audit, " "), "close"); len(audit) < 6 || closes != 4 {
		t.Errorf("the job's audit = %v, want its own entries and 4 closes", audit)
	}
	if r := e.do("GET", "/api/v1/jobs/"+uuid.NewString()+"/audit", viewerToken, nil); r.status != 404 {
		t.Errorf("audit of an unknown job = %d %s", r.status, r.body)
	}
	if r := e.do("POST", path+"/pause", operatorToken, nil); r.status != 409 {
		t.Errorf("pause a done job = %d %s", r.status, r.body)
	}
	r = e.do("GET", "/api/v1/jobs", viewerToken, nil)
	if r.status != 200 || !strings.Contains(string(r.body), preview.Job.ID) {
		t.Errorf("list = %d %s", r.status, r.body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/jobs", `{"action": "close", "filter": {}, "reason": "x"}`},
		{"POST", "/api/v1/jobs", `{"action": "close", "ids": ["nope"], "reason": "x"}`},
		{"POST", "/api/v1/jobs", `{"action": "close", "filter": {"topic": "a"}}`},
		{"POST", "/api/v1/jobs", `{"action": "delete", "filter": {"topic": "a"}}`},
		{"POST", "/api/v1/jobs", `{"action": "close", "filter": {"topic": "a"}, "reason": "x", "rate_limit": -5}`},
		{"POST", "/api/v1/jobs", `{"action": "close", "filter": {"topic": "a"}, "reason": "x", "rate_limit": 1e-9}`},
		{"POST", "/api/v1/jobs", `{"action": "close", "filter": {"topic": "a"}, "reason": "x", "rate_limit": 100001}`},
		{"GET", "/api/v1/jobs/" + preview.Job.ID + "/items?outcome=maybe", ""},
		{"GET", "/api/v1/jobs/" + preview.Job.ID + "/items?cursor=-1", ""},
		{"GET", "/api/v1/jobs?cursor=zzz", ""},
		{"GET", "/api/v1/jobs/" + preview.Job.ID + "/audit?cursor=zzz", ""},
		{"GET", "/api/v1/jobs/" + preview.Job.ID + "/audit?limit=0", ""},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		r := e.do(c.method, c.path, operatorToken, body)
		if r.status != 400 {
			t.Errorf("%s %s %s = %d %s", c.method, c.path, c.body, r.status, r.body)
		}
		if strings.Contains(c.body, "rate_limit") && !strings.Contains(string(r.body), `"rate_limit"`) {
			t.Errorf("%s: the problem does not name rate_limit: %s", c.body, r.body)
		}
	}
}

// The notification delivery log is for admins only.
func TestNotificationsLogIsForAdmins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *setup) { s.NoResender = true })
	for token, want := range map[string]int{viewerToken: 403, operatorToken: 403, adminToken: 200} {
		if r := e.do("GET", "/api/v1/notifications", token, nil); r.status != want {
			t.Errorf("GET /notifications = %d, want %d", r.status, want)
		}
	}
	if r := e.do("GET", "/api/v1/notifications?cursor=-3", adminToken, nil); r.status != 400 {
		t.Errorf("bad cursor = %d", r.status)
	}
}

// Reactivating the own dead-letter topic: admins start a run (one at a time), everyone reads
// its progress; bad input changes nothing.
func TestReactivationAPI(t *testing.T) {
	t.Parallel()
	var st *storekit.Store
	e := newEnv(t, func(s *setup) {
		s.NoResender = true
		st = s.Core.Store
		s.Core.DeadLetterTopic = "redrive.dlt"
		s.Core.Reactivate = func(ctx context.Context, r operator.ReactivateRequest) (*redrive.Reactivation, error) {
			return storekit.StartReactivation(ctx, s.Core.Store, storekit.Reactivation{Topic: "redrive.dlt",
				Principal: r.Principal, Reason: r.Reason, Limit: r.Limit, UpToNow: r.UpToNow})
		}
	})
	for _, bad := range []string{`{}`, `{"limit": 5, "up_to_now": true}`, `{"limit": -1}`, `{"limit": "5"}`, `{"up_to_now": true, "Up_To_Now": true}`} {
		if r := e.do("POST", "/api/v1/dead-letters/reactivations", adminToken, bad); r.status != 400 {
			t.Errorf("%s = %d %s", bad, r.status, r.body)
		}
	}
	r := e.do("POST", "/api/v1/dead-letters/reactivations", adminToken, `{"limit": 100, "reason": "registry is back"}`)
	var run struct {
		ID    int64  `json:"id"`
		State string `json:"state"`
		Limit *int64 `json:"limit"`
	}
	r.json(t, &run)
	if r.status != 202 || run.State != "RUNNING" || run.Limit == nil || *run.Limit != 100 {
		t.Fatalf("reactivate = %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/dead-letters/reactivations", adminToken, `{"up_to_now": true}`); r.status != 409 {
		t.Errorf("a second run = %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/dead-letters/reactivations", viewerToken, nil); r.status != 200 || !strings.Contains(string(r.body), `"reason":"registry is back"`) {
		t.Errorf("list = %d %s", r.status, r.body)
	}
	r = e.do("GET", "/api/v1/dead-letters/reactivations/"+strconv.FormatInt(run.ID, 10), viewerToken, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"action":"dlt_reactivate_start"`) {
		t.Errorf("get = %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/dead-letters/reactivations/999", viewerToken, nil); r.status != 404 {
		t.Errorf("unknown run = %d", r.status)
	}
	// Runs are paged, newest first.
	if _, err := st.FinishReactivation(context.Background(), run.ID, redrive.ReactivationDone, ""); err != nil {
		t.Fatal(err)
	}
	r = e.do("POST", "/api/v1/dead-letters/reactivations", adminToken, `{"up_to_now": true}`)
	var run2 struct {
		ID int64 `json:"id"`
	}
	r.json(t, &run2)
	if r.status != 202 {
		t.Fatalf("second run = %d %s", r.status, r.body)
	}
	type runPage struct {
		Data []struct {
			ID int64 `json:"id"`
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	var p1, p2 runPage
	r = e.do("GET", "/api/v1/dead-letters/reactivations?limit=1", viewerToken, nil)
	r.json(t, &p1)
	if len(p1.Data) != 1 || p1.Data[0].ID != run2.ID || p1.NextCursor == nil {
		t.Fatalf("first page = %s", r.body)
	}
	r = e.do("GET", "/api/v1/dead-letters/reactivations?limit=1&cursor="+*p1.NextCursor, viewerToken, nil)
	r.json(t, &p2)
	if len(p2.Data) != 1 || p2.Data[0].ID != run.ID || p2.NextCursor != nil {
		t.Fatalf("second page = %s", r.body)
	}
	for _, bad := range []string{"xyz", "AQ", "AXIAAAAAAAAAAA", "AWoAAAAAAAAAAQ"} {
		if r := e.do("GET", "/api/v1/dead-letters/reactivations?cursor="+bad, viewerToken, nil); r.status != 400 || !strings.Contains(string(r.body), "cursor") {
			t.Errorf("cursor %q = %d %s", bad, r.status, r.body)
		}
	}
	none := newEnv(t, func(s *setup) { s.NoResender = true })
	if r := none.do("POST", "/api/v1/dead-letters/reactivations", adminToken, `{"up_to_now": true}`); r.status != 503 {
		t.Errorf("without a reactivator = %d", r.status)
	}
}

// Export through the API, import into another redrive: the same failures; a malformed line is
// refused by number; importing is for admins.
func TestExportImportAPI(t *testing.T) {
	t.Parallel()
	src := newEnv(t, func(s *setup) { s.NoResender = true })
	for range 3 {
		src.insert(row{Key: []byte{0xff, 0x01}, HeaderNames: []string{"h", "h"}, HeaderValues: [][]byte{nil, []byte("2")}})
	}
	r := src.do("GET", "/api/v1/failures/export?topic=orders", viewerToken, nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/x-ndjson" || strings.Count(string(r.body), "\n") != 3 {
		t.Fatalf("export = %d %q", r.status, r.body)
	}
	file := r.body
	dst := newEnv(t, func(s *setup) { s.NoResender = true })
	post := func(token, query string, body []byte) *response {
		return doRequest(t, dst.handler, "POST", "/api/v1/failures/import"+query, token, body, func(r *http.Request) {
			r.Header.Set("Content-Type", "application/x-ndjson")
		})
	}
	if r := post(operatorToken, "", file); r.status != 403 {
		t.Errorf("import as operator = %d", r.status)
	}
	if r := post(adminToken, "?dry_run=true", file); r.status != 200 || !strings.Contains(string(r.body), `"inserted":3`) {
		t.Errorf("dry run = %d %s", r.status, r.body)
	}
	bad := append(append([]byte(nil), file...), []byte("{\"format\":1}\n")...)
	r = post(adminToken, "", bad)
	if p := r.problem(t); r.status != 400 || p.Field != "line 4" {
		t.Errorf("bad line = %d %+v", r.status, p)
	}
	if r := post(adminToken, "", file); r.status != 200 || !strings.Contains(string(r.body), `"inserted":3,"skipped":0`) {
		t.Errorf("import = %d %s", r.status, r.body)
	}
	if r := post(adminToken, "", file); r.status != 200 || !strings.Contains(string(r.body), `"inserted":0,"skipped":3`) {
		t.Errorf("import again = %d %s", r.status, r.body)
	}
	again := dst.do("GET", "/api/v1/failures/export", viewerToken, nil)
	if string(again.body) != string(file) {
		t.Errorf("the re-export differs:\n%s\n%s", again.body, file)
	}
}

// Opening a ticket from a group: the tracker's key becomes the group's ticket with its link;
// a second time is a conflict; a failing tracker changes nothing.
func TestOpenTicket(t *testing.T) {
	t.Parallel()
	calls := 0
	fail := false
	e := newEnv(t, func(s *setup) {
		s.NoResender = true
		s.Core.OpenTicket = func(_ context.Context, g *redrive.Group) (string, error) {
			calls++
			if fail {
				return "", errors.New("Jira answered 503 Service Unavailable")
			}
			return "OPS-" + strconv.FormatInt(g.ID, 10), nil
		}
		s.Core.TicketURL = func(t string) string { return "https://tracker.example/browse/" + t }
	})
	e.insert(row{ErrorCode: "A"})
	e.insert(row{ErrorCode: "B"})
	var ids []int64
	rows, err := e.pool.Query(context.Background(), "SELECT id FROM failure_groups ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		_ = rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	path := "/api/v1/groups/" + strconv.FormatInt(ids[0], 10) + "/ticket"
	if r := e.do("POST", path, viewerToken, nil); r.status != 403 {
		t.Errorf("as viewer = %d", r.status)
	}
	r := e.do("POST", path, operatorToken, nil)
	want := "OPS-" + strconv.FormatInt(ids[0], 10)
	if r.status != 201 || !strings.Contains(string(r.body), `"ticket":"`+want+`"`) || !strings.Contains(string(r.body), `"ticket_url":"https://tracker.example/browse/`+want+`"`) {
		t.Errorf("open = %d %s", r.status, r.body)
	}
	if r := e.do("POST", path, operatorToken, nil); r.status != 409 || calls != 1 {
		t.Errorf("again = %d, %d calls", r.status, calls)
	}
	fail = true
	before := e.checksum()
	if r := e.do("POST", "/api/v1/groups/"+strconv.FormatInt(ids[1], 10)+"/ticket", operatorToken, nil); r.status != 502 || !strings.Contains(string(r.body), "503") {
		t.Errorf("tracker down = %d %s", r.status, r.body)
	}
	if e.checksum() != before {
		t.Error("a failed ticket changed something")
	}
}

// A repair stores a revision, resends it byte for byte with the revision header, and leaves
// the original unchanged; bad edits change nothing.
func TestRepair(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	orig := []byte(`{"amount":"12,50"}`)
	id := e.insert(row{Topic: "orders", Value: orig, Key: []byte("k-9"), HeaderNames: []string{"trace"}, HeaderValues: [][]byte{[]byte("t-1")}})
	path := "/api/v1/failures/" + id.String()
	before := e.checksum()
	for _, c := range []struct {
		token, body string
		status      int
	}{
		{operatorToken, `{"reason": "fix", "value": "{}", "value_format": "json"}`, 403},
		{adminToken, `{"value": "{}", "value_format": "json"}`, 400},
		{adminToken, `{"reason": "fix", "value": "{\"amount\": 12.5", "value_format": "json"}`, 400},
		{adminToken, `{"reason": "fix", "value": "x", "value_format": "avro"}`, 422},
		{adminToken, `{"reason": "fix", "value": "x", "target_topic": "elsewhere"}`, 400},
		{adminToken, `{"reason": "fix", "value": "x", "value_base64": "eA=="}`, 400},
		{adminToken, `{"reason": "fix", "value": "x", "value_format": "yaml"}`, 400},
	} {
		if r := e.do("POST", path+"/repair", c.token, c.body); r.status != c.status {
			t.Errorf("%s = %d %s, want %d", c.body, r.status, r.body, c.status)
		}
	}
	if e.checksum() != before {
		t.Fatal("a refused repair changed something")
	}
	edited := `{"amount":12.5}`
	r := e.do("POST", path+"/repair", adminToken, map[string]any{"reason": "decimal comma", "value": edited, "value_format": "json",
		"headers": []map[string]any{{"name": "trace", "value": "t-1"}, {"name": "fixed-by", "value": "ada"}}})
	if r.status != 200 || !strings.Contains(string(r.body), `"outcome":"resent"`) {
		t.Fatalf("repair = %d %s", r.status, r.body)
	}
	m := e.cluster.ConsumeN(t, "orders", 1, 30*time.Second)[0]
	headers := map[string]string{}
	for _, h := range m.Headers {
		headers[h.Key] = string(h.Value)
	}
	if string(m.Value) != edited || string(m.Key) != "k-9" || headers["fixed-by"] != "ada" || headers["trace"] != "t-1" || headers["redrive-revision"] == "" {
		t.Errorf("resent %q %q %v", m.Key, m.Value, headers)
	}
	var stored []byte
	if err := e.pool.QueryRow(context.Background(), "SELECT original_value FROM failures WHERE id = $1", id).Scan(&stored); err != nil || string(stored) != string(orig) {
		t.Errorf("the original changed: %q %v", stored, err)
	}
	r = e.do("GET", path+"/revisions", viewerToken, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"reason":"decimal comma"`) || !strings.Contains(string(r.body), `"principal":"token:ada"`) {
		t.Errorf("revisions = %d %s", r.status, r.body)
	}
	if e.state(id) != redrive.StateResent {
		t.Errorf("state after the repair: %s", e.state(id))
	}
	if r := e.do("POST", path+"/repair", adminToken, `{"reason": "again", "value": "x"}`); r.status != 409 {
		t.Errorf("repair of a RESENT failure = %d", r.status)
	}
}

// A Confluent-Avro payload is repaired as JSON and re-encoded with its writer schema and id.
func TestRepairAvro(t *testing.T) {
	t.Parallel()
	reg, err := schemaregistry.NewClient(schemaregistry.NewConfig("mock://api-repair-avro"))
	if err != nil {
		t.Fatal(err)
	}
	schema := `{"type":"record","name":"Payment","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}`
	schemaID, err := reg.Register("orders-value", schemaregistry.SchemaInfo{Schema: schema}, false)
	if err != nil {
		t.Fatal(err)
	}
	payloads, err := payload.New(payload.Config{Registry: confluentsr.New(reg)})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(s *setup) { s.Core.Payloads = payloads })
	framed := []byte{0, 0, 0, 0, 0, 0x0e, 0x00} // id 7, note null
	binary.BigEndian.PutUint32(framed[1:5], uint32(schemaID))
	id := e.insert(row{Topic: "orders", Value: framed})
	r := e.do("POST", "/api/v1/failures/"+id.String()+"/repair", adminToken,
		map[string]any{"reason": "note added", "value": `{"id": 8, "note": {"string": "ok"}}`, "value_format": "avro"})
	if r.status != 200 {
		t.Fatalf("repair = %d %s", r.status, r.body)
	}
	m := e.cluster.ConsumeN(t, "orders", 1, 30*time.Second)[0]
	got, err := payloads.Decode("orders", "value", m.Value)
	if err != nil || got.SchemaID != schemaID || string(got.JSON) != `{"id":8,"note":{"string":"ok"}}` {
		t.Errorf("resent %x: %+v, %v", m.Value, got, err)
	}
}
