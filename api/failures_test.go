package api_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/go-json-experiment/json"
	"github.com/google/uuid"
	"github.com/linkedin/goavro/v2"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/avro/confluentsr"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/payload"
)

type summary struct {
	ID           uuid.UUID `json:"id"`
	State        string    `json:"state"`
	Topic        string    `json:"topic"`
	ErrorMessage string    `json:"error_message"`
	KeySize      *int      `json:"key_size"`
	ValueSize    int       `json:"value_size"`
	CreatedAt    time.Time `json:"created_at"`
	GroupID      int64     `json:"group_id"`
}

type failurePage struct {
	Data       []summary `json:"data"`
	NextCursor *string   `json:"next_cursor"`
}

func (e *env) list(query string) failurePage {
	e.t.Helper()
	r := e.do("GET", "/api/v1/failures?"+query, viewerToken, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /failures?%s = %d %s", query, r.status, r.body)
	}
	var p failurePage
	r.json(e.t, &p)
	return p
}

func ids(p failurePage) []uuid.UUID {
	out := make([]uuid.UUID, len(p.Data))
	for i, s := range p.Data {
		out[i] = s.ID
	}
	return out
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	base := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	a := e.insert(row{State: redrive.StateRetryPending, Temporality: avro.Temporary, Topic: "payments",
		ErrorMessage: "Timeout talking to ledger", CreatedAt: base, Key: []byte{0x00, 0xff, 0x10}})
	b := e.insert(row{PublisherSystem: "crm", PublisherService: "crm-api", ErrorCode: "WRONG_EVENT_TYPE",
		MessageType: "CustomerMoved", CreatedAt: base.Add(time.Hour), Key: []byte("cust 1/ä")})
	c := e.insert(row{State: redrive.StateClosed, Temporality: avro.Unknown, ErrorMessage: "NPE in LEDGER",
		CreatedAt: base.Add(2 * time.Hour), NullKey: true})
	var groupB int64
	if err := e.pool.QueryRow(context.Background(), "SELECT group_id FROM failures WHERE id = $1", b).Scan(&groupB); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query string
		want  []uuid.UUID
	}{
		{"", []uuid.UUID{c, b, a}},
		{"sort=oldest", []uuid.UUID{a, b, c}},
		{"state=PERMANENT", []uuid.UUID{b}},
		{"state=PERMANENT&state=RETRY_PENDING", []uuid.UUID{b, a}},
		{"state=closed,retry_pending", []uuid.UUID{c, a}},
		{"temporality=TEMPORARY", []uuid.UUID{a}},
		{"temporality=UNKNOWN&temporality=PERMANENT", []uuid.UUID{c, b}},
		{"topic=payments", []uuid.UUID{a}},
		{"publisher_system=crm", []uuid.UUID{b}},
		{"publisher_service=crm-api", []uuid.UUID{b}},
		{"error_code=WRONG_EVENT_TYPE", []uuid.UUID{b}},
		{"message_type=CustomerMoved", []uuid.UUID{b}},
		{"group_id=" + fmt.Sprint(groupB), []uuid.UUID{b}},
		{"key=" + url.QueryEscape("cust 1/ä"), []uuid.UUID{b}},
		{"key_base64=" + url.QueryEscape(base64.StdEncoding.EncodeToString([]byte{0x00, 0xff, 0x10})), []uuid.UUID{a}},
		{"key_base64=" + base64.RawURLEncoding.EncodeToString([]byte{0x00, 0xff, 0x10}), []uuid.UUID{a}},
		{"q=ledger", []uuid.UUID{c, a}},
		{"q=" + url.QueryEscape("%"), nil},
		{"created_from=2024-06-01T01:00:00Z", []uuid.UUID{c, b}},
		{"created_to=2024-06-01T01:00:00Z", []uuid.UUID{a}},
		{"created_from=2024-06-01T02:00:00%2B01:00&created_to=2024-06-01T03:00:00%2B01:00", []uuid.UUID{b}},
		{"state=RETRY_PENDING&topic=payments&q=timeout", []uuid.UUID{a}},
		{"topic=" + url.QueryEscape("x'; DROP TABLE failures; --"), nil},
		{"q=" + url.QueryEscape("' OR 1=1 --"), nil},
	} {
		if got := ids(e.list(tc.query)); !slices.Equal(got, tc.want) {
			t.Errorf("?%s: got %v, want %v", tc.query, got, tc.want)
		}
	}
	p := e.list("limit=1&topic=payments")
	if s := p.Data[0]; s.KeySize == nil || *s.KeySize != 3 || s.ValueSize != 11 || s.Topic != "payments" || p.NextCursor != nil {
		t.Errorf("summary = %+v, next %v", s, p.NextCursor)
	}
	// A summary carries no payload bytes.
	r := e.do("GET", "/api/v1/failures?topic=payments", viewerToken, nil)
	for _, field := range []string{`"key"`, `"value"`, `"headers"`, `"stack_trace"`} {
		if strings.Contains(string(r.body), field+":") {
			t.Errorf("list item has %s: %s", field, r.body)
		}
	}
}

// Paging through 10,000 rows returns each once, in order, while rows are inserted.
func TestPaginationOverTenThousandRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const n = 10000
	base := time.Now().Add(-time.Hour)
	e.seed(n, base)

	for _, sort := range []string{"newest", "oldest"} {
		stop := make(chan struct{})
		var (
			wg       sync.WaitGroup
			inserted atomic.Int64
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				e.seedConcurrent()
				inserted.Add(1)
			}
		}()
		seen := map[uuid.UUID]bool{}
		var (
			prev   *summary
			cursor string
			seeded int
		)
		for pages := 0; ; pages++ {
			if pages > n/500+100 {
				t.Fatalf("%s: too many pages", sort)
			}
			q := "limit=500&sort=" + sort
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			p := e.list(q)
			for i := range p.Data {
				s := p.Data[i]
				if seen[s.ID] {
					t.Fatalf("%s: %s listed twice", sort, s.ID)
				}
				seen[s.ID] = true
				if !s.CreatedAt.Before(base.Add(30 * time.Minute)) {
					continue // inserted during the test
				}
				seeded++
				if prev != nil {
					less := prev.CreatedAt.Before(s.CreatedAt) || prev.CreatedAt.Equal(s.CreatedAt) && prev.ID.String() < s.ID.String()
					if less != (sort == "oldest") {
						t.Fatalf("%s: %v (%s) listed before %v (%s)", sort, prev.CreatedAt, prev.ID, s.CreatedAt, s.ID)
					}
				}
				prev = &s
			}
			if p.NextCursor == nil {
				break
			}
			cursor = *p.NextCursor
		}
		close(stop)
		wg.Wait()
		if seeded != n {
			t.Errorf("%s: listed %d of the %d seeded rows", sort, seeded, n)
		}
		if inserted.Load() == 0 {
			t.Errorf("%s: no row was inserted concurrently", sort)
		}
	}
}

// seedConcurrent inserts one row created now, as intake does while operators page.
func (e *env) seedConcurrent() {
	_, err := e.pool.Exec(context.Background(), `
		INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id,
			event_created, publisher_system, publisher_service, original_topic, original_partition,
			original_offset, original_value, causing_message, group_id)
		SELECT 'PERMANENT', 'PERMANENT', 'LIVE', 'live', gen_random_uuid()::text, gen_random_uuid()::text,
			now(), 'seed', 'seed', 'live', 0, 0, '\x00'::bytea, gen_random_uuid()::text, min(id)
		FROM failure_groups`)
	if err != nil {
		e.t.Error(err)
	}
}

type bytesView struct {
	Size      int     `json:"size"`
	Base64    string  `json:"base64"`
	Text      *string `json:"text"`
	Truncated bool    `json:"truncated"`
}

type detailView struct {
	summary
	StackTrace *string    `json:"stack_trace"`
	Key        *bytesView `json:"key"`
	Value      *bytesView `json:"value"`
	Headers    []struct {
		Name  string     `json:"name"`
		Value *bytesView `json:"value"`
	} `json:"headers"`
	Message struct {
		Type *string `json:"type"`
	} `json:"message"`
	Attempts []summary `json:"attempts"`
	Audit    []struct {
		Action    string         `json:"action"`
		Principal string         `json:"principal"`
		Reason    *string        `json:"reason"`
		Details   map[string]any `json:"details"`
	} `json:"audit"`
}

func TestGetFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *setup) { s.API.InlinePayloadBytes = 8 })
	base := time.Now().Add(-time.Hour)
	first := e.insert(row{State: redrive.StateResent, Causing: "order-9", Attempt: 1, CreatedAt: base})
	id := e.insert(row{Causing: "order-9", Attempt: 2, CreatedAt: base.Add(time.Minute), Key: []byte("k-1"),
		Value:       []byte("0123456789abcdef"),
		HeaderNames: []string{"trace", "bin", "trace", "none"}, HeaderValues: [][]byte{[]byte("t1"), {0x00, 0x01}, []byte("t2"), nil}})
	if r := e.do("POST", "/api/v1/failures/"+id.String()+"/close", operatorToken, map[string]string{"reason": "known"}); r.status != 200 {
		t.Fatalf("close = %d %s", r.status, r.body)
	}
	r := e.do("GET", "/api/v1/failures/"+id.String(), viewerToken, nil)
	if r.status != 200 {
		t.Fatalf("GET = %d %s", r.status, r.body)
	}
	var d detailView
	r.json(t, &d)
	if d.ID != id || d.State != "CLOSED" || d.Key.Size != 3 || *d.Key.Text != "k-1" || d.Key.Truncated {
		t.Errorf("detail = %+v key %+v", d.summary, d.Key)
	}
	if d.Value.Size != 16 || !d.Value.Truncated || *d.Value.Text != "01234567" || d.Value.Base64 != base64.StdEncoding.EncodeToString([]byte("01234567")) {
		t.Errorf("value = %+v", d.Value)
	}
	if len(d.Headers) != 4 || d.Headers[0].Name != "trace" || *d.Headers[0].Value.Text != "t1" ||
		d.Headers[1].Value.Text != nil || d.Headers[1].Value.Base64 != "AAE=" || *d.Headers[2].Value.Text != "t2" || d.Headers[3].Value != nil {
		t.Errorf("headers = %+v", d.Headers)
	}
	if len(d.Attempts) != 2 || d.Attempts[0].ID != first || d.Attempts[1].ID != id {
		t.Errorf("attempts = %+v", d.Attempts)
	}
	// The close (this read of the payload is recorded after the audit is read).
	if len(d.Audit) != 1 || d.Audit[0].Action != "close" || d.Audit[0].Principal != "token:otto" || *d.Audit[0].Reason != "known" {
		t.Errorf("audit = %+v", d.Audit)
	}
	if *d.Message.Type != "OrderCreated" {
		t.Errorf("message = %+v", d.Message)
	}
	nullKey := e.insert(row{NullKey: true})
	r = e.do("GET", "/api/v1/failures/"+nullKey.String(), viewerToken, nil)
	if !strings.Contains(string(r.body), `"key":null`) || !strings.Contains(string(r.body), `"key_size":null`) {
		t.Errorf("null key detail: %s", r.body)
	}
	if r := e.do("GET", "/api/v1/failures/"+uuid.NewString(), viewerToken, nil); r.status != 404 {
		t.Errorf("unknown id = %d", r.status)
	} else {
		r.problem(t)
	}
}

func TestPayloadFormats(t *testing.T) {
	t.Parallel()
	reg, err := schemaregistry.NewClient(schemaregistry.NewConfig("mock://api-payload"))
	if err != nil {
		t.Fatal(err)
	}
	schema := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}`
	schemaID, err := reg.Register("orders-value", schemaregistry.SchemaInfo{Schema: schema}, false)
	if err != nil {
		t.Fatal(err)
	}
	codec, err := goavro.NewCodec(schema)
	if err != nil {
		t.Fatal(err)
	}
	datum, err := codec.BinaryFromNative(nil, map[string]any{"id": int64(7), "note": goavro.Union("string", "rush")})
	if err != nil {
		t.Fatal(err)
	}
	framed := append([]byte{0, 0, 0, 0, 0}, datum...)
	binary.BigEndian.PutUint32(framed[1:5], uint32(schemaID))
	unknownID := append([]byte{0, 0, 0, 3, 0xe7}, datum...)
	trailing := append(append([]byte(nil), framed...), 0x01)

	payloads, err := payload.New(payload.Config{Registry: confluentsr.New(reg)})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(s *setup) { s.Core.Payloads = payloads })
	jsonID := e.insert(row{Value: []byte(`{"a":[1,2],"b":"x"}`), Key: []byte{0xde, 0xad}})
	avroID := e.insert(row{Value: framed, NullKey: true})
	unknownSchema := e.insert(row{Value: unknownID})
	trailingID := e.insert(row{Value: trailing})

	get := func(id uuid.UUID, query string) *response {
		return e.do("GET", "/api/v1/failures/"+id.String()+"/payload?"+query, viewerToken, nil)
	}
	r := get(jsonID, "")
	if r.status != 200 || r.header.Get("Content-Type") != "application/octet-stream" || string(r.body) != `{"a":[1,2],"b":"x"}` {
		t.Errorf("raw value = %d %q %q", r.status, r.header.Get("Content-Type"), r.body)
	}
	if r = get(jsonID, "part=key&format=raw"); r.status != 200 || string(r.body) != "\xde\xad" {
		t.Errorf("raw key = %d %q", r.status, r.body)
	}
	if r = get(jsonID, "part=key&format=hex"); r.status != 200 || string(r.body) != hex.Dump([]byte{0xde, 0xad}) ||
		!strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Errorf("hex key = %d %q", r.status, r.body)
	}
	if r = get(jsonID, "format=json"); r.status != 200 || string(r.body) != "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": \"x\"\n}\n" {
		t.Errorf("json value = %d %q", r.status, r.body)
	}
	if r = get(avroID, "format=avro"); r.status != 200 {
		t.Fatalf("avro value = %d %s", r.status, r.body)
	}
	var av struct {
		SchemaID int            `json:"schema_id"`
		Value    map[string]any `json:"value"`
	}
	r.json(t, &av)
	if av.SchemaID != schemaID || av.Value["id"] != float64(7) || fmt.Sprint(av.Value["note"]) != "map[string:rush]" {
		t.Errorf("avro = %+v", av)
	}
	for _, tc := range []struct {
		id     uuid.UUID
		query  string
		status int
		detail string
	}{
		{avroID, "format=json", 422, "not JSON"},
		{jsonID, "format=avro", 422, "not framed as Avro"},
		{unknownSchema, "format=avro", 422, "schema id 999"},
		{trailingID, "format=avro", 422, "trailing bytes"},
		{avroID, "part=key", 404, "key is null"},
		{uuid.New(), "", 404, "not found"},
	} {
		r := get(tc.id, tc.query)
		if p := r.problem(t); r.status != tc.status || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%s?%s = %d %q, want %d with %q", tc.id, tc.query, r.status, p.Detail, tc.status, tc.detail)
		}
	}
	// Without a registry, format=avro does not apply.
	e2 := newEnv(t, nil)
	id := e2.insert(row{Value: framed})
	r = e2.do("GET", "/api/v1/failures/"+id.String()+"/payload?format=avro", viewerToken, nil)
	if p := r.problem(t); r.status != 422 || !strings.Contains(p.Detail, "no schema registry") {
		t.Errorf("avro without registry = %d %s", r.status, p.Detail)
	}
}

// A query that outlives the timeout is a 503 that asks to narrow the filter.
func TestQueryTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *setup) { s.Core.QueryTimeout = time.Nanosecond })
	e.insert(row{})
	r := e.do("GET", "/api/v1/failures?q=decode", viewerToken, nil)
	if p := r.problem(t); r.status != 503 || !strings.Contains(p.Detail, "narrow the filter") {
		t.Errorf("timed out list = %d %+v", r.status, p)
	}
}

// Offsets past 2^53 travel as decimal strings, exact for every client: a JSON number there
// would be rounded by clients that read numbers as doubles.
func TestOffsetsAreExactStrings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const big = int64(1)<<53 + 1 // 9007199254740993: no double holds it
	id := e.insert(row{Offset: big})
	for _, path := range []string{"/api/v1/failures", "/api/v1/failures/" + id.String()} {
		r := e.do("GET", path, viewerToken, nil)
		if r.status != 200 || !strings.Contains(string(r.body), `"offset":"9007199254740993"`) {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
		// A reader that decodes numbers as float64 (as JavaScript does) still gets it exactly.
		var loose map[string]any
		if err := json.Unmarshal(r.body, &loose); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(r.body), `"offset":9007`) {
			t.Errorf("%s: the offset is a JSON number", path)
		}
	}
}

// The search criteria through the API, with totals.
func TestSearchAndTotals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const trace = "0af7651916cd43dd8448eb211c80319c"
	bin := e.insert(row{Key: []byte{0xff, 0x01, 0x02}, Value: []byte(`{"customer":"c-77"}`)})
	traced := e.insert(row{Key: []byte("søren-1"), HeaderNames: []string{"traceparent", "tenant"},
		HeaderValues: [][]byte{[]byte("00-" + trace + "-b7ad6b7169203331-01"), []byte("blue")}})
	for range 3 {
		e.insert(row{})
	}
	one := func(query string, want uuid.UUID) {
		t.Helper()
		p := e.list(query)
		if len(p.Data) != 1 || p.Data[0].ID != want {
			t.Errorf("%s: %v, want %s", query, ids(p), want)
		}
	}
	one("key_prefix_base64="+url.QueryEscape(base64.StdEncoding.EncodeToString([]byte{0xff, 0x01})), bin)
	one("key_prefix="+url.QueryEscape("søren"), traced)
	one("trace_id="+strings.ToUpper(trace), traced)
	one("header=tenant%3Dblue", traced)
	one("payload=c-77&topic=orders", bin)
	r := e.do("GET", "/api/v1/failures?payload=c-77", viewerToken, nil)
	if p := r.problem(t); r.status != 400 || p.Field != "payload" || !strings.Contains(p.Detail, "bound") {
		t.Errorf("unbounded payload search = %d %+v", r.status, p)
	}
	r = e.do("GET", "/api/v1/failures?limit=2&total=true", viewerToken, nil)
	var got struct {
		Data  []any `json:"data"`
		Total struct {
			Count int64 `json:"count"`
			More  bool  `json:"more"`
		} `json:"total"`
	}
	r.json(t, &got)
	if r.status != 200 || len(got.Data) != 2 || got.Total.Count != 5 || got.Total.More {
		t.Errorf("total = %d %s", r.status, r.body)
	}
}

// Without the payload permission a failure shows metadata only, and says why; with it, the
// masking rules apply to every view and each read is audited; a resend still sends the
// original bytes.
func TestPayloadPermissionAndMasking(t *testing.T) {
	t.Parallel()
	rules, err := masking.Parse(strings.NewReader("orders json /customer/email\norders header authorization"), "test")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(s *setup) { s.Core.Masking = rules })
	value := []byte(`{"customer":{"email":"ann@example.com"},"total":5}`)
	id := e.insert(row{Topic: "orders", Value: value, Key: []byte("k-1"),
		HeaderNames: []string{"authorization", "trace"}, HeaderValues: [][]byte{[]byte("Bearer secret"), []byte("t-1")}})
	path := "/api/v1/failures/" + id.String()

	r := e.do("GET", path, noPayloadToken, nil)
	if r.status != 200 || strings.Contains(string(r.body), "ann@example.com") || strings.Contains(string(r.body), "Bearer") ||
		!strings.Contains(string(r.body), `"payload_hidden":"reading payloads`) || !strings.Contains(string(r.body), `"hidden":true`) ||
		!strings.Contains(string(r.body), `"content_type":"application/json"`) {
		t.Errorf("detail without the payload permission = %d %s", r.status, r.body)
	}
	if r := e.do("GET", path+"/payload", noPayloadToken, nil); r.status != 403 {
		t.Errorf("payload without the permission = %d %s", r.status, r.body)
	}
	r = e.do("GET", path, viewerToken, nil)
	var d struct {
		Value struct {
			Text *string `json:"text"`
		} `json:"value"`
		Headers []struct {
			Name  string `json:"name"`
			Value struct {
				Text *string `json:"text"`
			} `json:"value"`
		} `json:"headers"`
		Masked bool `json:"masked"`
	}
	r.json(t, &d)
	if r.status != 200 || !d.Masked || d.Value.Text == nil || *d.Value.Text != `{"customer":{"email":"***************"},"total":5}` ||
		*d.Headers[0].Value.Text != "*************" || *d.Headers[1].Value.Text != "t-1" {
		t.Errorf("masked detail = %d %s", r.status, r.body)
	}
	for _, format := range []string{"raw", "json", "hex"} {
		r := e.do("GET", path+"/payload?format="+format, viewerToken, nil)
		if r.status != 200 || strings.Contains(string(r.body), "ann@") || strings.Contains(string(r.body), "61 6e 6e 40") {
			t.Errorf("format %s = %d %s", format, r.status, r.body)
		}
	}
	var views int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_log WHERE failure_id = $1 AND action = 'payload_view' AND principal = 'token:vera'", id).Scan(&views); err != nil || views != 4 {
		t.Errorf("%d payload views audited (%v), want 4", views, err)
	}
	// The resend publishes the original.
	if r := e.do("POST", path+"/retry", operatorToken, nil); r.status != 200 {
		t.Fatalf("retry = %d %s", r.status, r.body)
	}
	m := e.cluster.ConsumeN(t, "orders", 1, 30*time.Second)[0]
	if string(m.Value) != string(value) || string(m.Headers[0].Value) != "Bearer secret" {
		t.Errorf("resent %s %v", m.Value, m.Headers)
	}
}

// A tombstone shows as value_null with no value; a failure from a foreign dead-letter topic
// shows its source, and the source filters find it; an unknown position is null.
func TestTombstonesAndSources(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	tomb := e.insert(row{})
	spring := e.insert(row{})
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, "UPDATE failures SET original_value = NULL WHERE id = $1", tomb); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE failures SET source_format = 'spring', source_topic = 'orders.DLT', source_partition = 0,
		source_offset = 9007199254740993, original_partition = -1, original_offset = -1 WHERE id = $1`, spring); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/api/v1/failures/"+tomb.String(), viewerToken, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"value_null":true`) || !strings.Contains(string(r.body), `"value":null`) {
		t.Errorf("tombstone = %d %s", r.status, r.body)
	}
	p := e.list("source_format=spring&source_topic=orders.DLT")
	if len(p.Data) != 1 || p.Data[0].ID != spring {
		t.Errorf("source filters = %v", ids(p))
	}
	r = e.do("GET", "/api/v1/failures/"+spring.String(), viewerToken, nil)
	for _, want := range []string{`"source_format":"spring"`, `"source_topic":"orders.DLT"`, `"source_offset":"9007199254740993"`, `"partition":null`, `"offset":null`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("detail lacks %s: %s", want, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/failures?source_format=kafka", viewerToken, nil); r.status != 400 {
		t.Errorf("bad source format = %d", r.status)
	}
}
