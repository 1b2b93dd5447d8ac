package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/store"
)

func init() { commands["api"] = benchAPI }

// Seed shape of the API benchmark.
const (
	apiBenchTopics   = 20
	apiBenchServices = 50
	apiBenchGroups   = 200
	apiBenchDays     = 30
)

// benchAPI seeds a database with failures (COPY) and measures the latency of API requests
// served over loopback HTTP: the first page, a filtered page, a deep page via its cursor, a
// detail and the stats; it prints the EXPLAIN plans of the list queries.
func benchAPI(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	var (
		n        = fs.Int("n", 1000000, "failures to seed")
		requests = fs.Int("requests", 500, "measured requests per scenario")
		deep     = fs.Int("page", 1000, "the deep page to fetch via its cursor")
		dbURL    = scratchServerFlag(fs)
		reuse    = fs.String("reuse", "", "URL of a database seeded by an earlier run with -keep; skips the seeding")
		keep     = fs.Bool("keep", false, "keep the seeded database and print its URL, for -reuse")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 || *requests <= 0 || *deep < 1 {
		return errors.New("-n, -requests and -page must be positive")
	}

	var pool *pgxpool.Pool
	if *reuse != "" {
		p, err := pgxpool.New(ctx, *reuse)
		if err != nil {
			return err
		}
		defer p.Close()
		pool = p
	} else {
		// Seeded at the layout before migration 020 and migrated: the rows are those the
		// benchmark always seeded, and COPY into the former table is much faster than through the
		// view's trigger.
		p, drop, err := scratchDatabaseAt(ctx, *dbURL, layoutVersion)
		if err != nil {
			return err
		}
		if *keep {
			defer p.Close()
			fmt.Printf("keeping the database: -reuse '%s'\n", p.Config().ConnString())
		} else {
			defer drop()
		}
		pool = p
		start := time.Now()
		if err := seedAPIBench(ctx, pool, *n); err != nil {
			return err
		}
		if err := migrateAll(ctx, pool); err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
			return err
		}
		fmt.Printf("seeded %d failures in %s (COPY at migration %d, the migrations, then VACUUM ANALYZE)\n", *n,
			time.Since(start).Round(time.Second), layoutVersion)
	}
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		return err
	}
	const token = "bench-token-0123456789abcdef"
	tokens, err := auth.ParseTokens("bench:viewer+payload:" + token)
	if err != nil {
		return err
	}
	authn, err := auth.NewAuthenticator(auth.Config{Tokens: tokens})
	if err != nil {
		return err
	}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	core, err := operator.New(operator.Config{Store: st, Logger: discard})
	if err != nil {
		return err
	}
	h, err := api.New(api.Config{Core: core, Auth: authn, Logger: discard})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := &apiBenchClient{base: srv.URL + api.Prefix, token: token, http: srv.Client()}

	var rows int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM failures").Scan(&rows); err != nil {
		return err
	}
	fmt.Printf("api benchmark: %d failures, %d measured requests per scenario, one client over loopback HTTP\n", rows, *requests)
	var bytes int64
	if err := pool.QueryRow(ctx, apiBenchBytesSQL).Scan(&bytes); err != nil {
		return fmt.Errorf("size of the failure tables: %w", err)
	}
	fmt.Printf("stored bytes: %d over all failure tables (pg_total_relation_size: heap, TOAST, indexes), %.0f bytes per failure\n",
		bytes, float64(bytes)/float64(max(rows, 1)))

	// Scenario inputs: the cursor of the deep page, and ids for details.
	cursor, walk, err := c.cursorOf(ctx, *deep)
	if err != nil {
		return err
	}
	fmt.Printf("walked to page %d (limit 50) in %s (%s per page)\n", *deep, walk.Round(time.Millisecond), (walk / time.Duration(*deep-1)).Round(time.Microsecond))
	idRows, err := pool.Query(ctx, "SELECT id FROM failure_states TABLESAMPLE SYSTEM (1) LIMIT 2000")
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(idRows, pgx.RowTo[uuid.UUID])
	if err != nil || len(ids) == 0 {
		return fmt.Errorf("sample ids: %v (%d ids)", err, len(ids))
	}
	filtered := "state=PERMANENT&topic=topic-07&limit=50"
	scenarios := []struct {
		name string
		path func(i int) string
	}{
		{"first page, unfiltered (limit 50)", func(int) string { return "/failures?limit=50" }},
		{"filtered page (state + topic)", func(int) string { return "/failures?" + filtered }},
		{fmt.Sprintf("page %d via cursor", *deep), func(int) string { return "/failures?limit=50&cursor=" + cursor }},
		{"free-text search (q, rare match)", func(i int) string {
			return "/failures?limit=50&q=" + url.QueryEscape(fmt.Sprintf("order %d ", 1000+i%5000))
		}},
		{"detail", func(i int) string { return "/failures/" + ids[i%len(ids)].String() }},
		// The search criteria (each request a different value).
		{"search: key prefix (8 bytes)", func(i int) string { return "/failures?limit=50&key_prefix=" + ids[i%len(ids)].String()[:8] }},
		{"search: event id", func(i int) string { return "/failures?limit=50&event_id=" + ids[i%len(ids)].String() }},
		{"search: idempotence id", func(i int) string { return "/failures?limit=50&idempotence_id=" + ids[i%len(ids)].String() }},
		{"search: causing event id", func(i int) string {
			return "/failures?limit=50&causing_event_id=order-" + ids[i%len(ids)].String()
		}},
		{"search: trace id", func(i int) string { return fmt.Sprintf("/failures?limit=50&trace_id=%032x", 1+(i*7919)%*n) }},
		{"search: stack-trace hash", func(i int) string { return fmt.Sprintf("/failures?limit=50&stack_trace_hash=%08x", i%200) }},
		{"search: header name=value (first page)", func(int) string { return "/failures?limit=50&header=content-type%3Dapplication%2Fjson" }},
		{"search: no ticket (first page)", func(int) string { return "/failures?limit=50&no_ticket=true" }},
		{"search: payload text within one topic (bounded)", func(i int) string {
			return fmt.Sprintf("/failures?limit=50&topic=topic-%02d&payload=%%22customer%%22%%3A%%22c-%d%%22", i%apiBenchTopics, i%9973)
		}},
		{"list with total (exact to 10,000)", func(int) string { return "/failures?limit=50&state=PERMANENT&topic=topic-07&total=true" }},
		{"stats (cached, refreshed every 10s)", func(int) string { return "/stats" }},
	}
	fmt.Printf("\n| request | p50 | p99 | max |\n|---|---|---|---|\n")
	for _, sc := range scenarios {
		lat, err := c.measure(ctx, *requests, sc.path)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Printf("| %s | %s | %s | %s |\n", sc.name, apiPct(lat, 50), apiPct(lat, 99), apiPct(lat, 100))
	}
	// The stats query itself, uncached.
	var statsLat []time.Duration
	for range 10 {
		start := time.Now()
		if _, err := st.FailureStats(ctx); err != nil {
			return err
		}
		statsLat = append(statsLat, time.Since(start))
	}
	sort.Slice(statsLat, func(i, j int) bool { return statsLat[i] < statsLat[j] })
	fmt.Printf("| stats query uncached (store.FailureStats, 10 runs) | %s | %s | %s |\n", apiPct(statsLat, 50), apiPct(statsLat, 99), apiPct(statsLat, 100))

	pos, err := apiBenchPosition(ctx, st, *deep)
	if err != nil {
		return err
	}
	for _, ex := range []struct {
		name string
		p    store.ListParams
	}{
		{"first page, unfiltered", store.ListParams{Limit: 50}},
		{"filtered page (state + topic)", store.ListParams{Limit: 50, Filter: redrive.Filter{States: []redrive.State{redrive.StatePermanent}, Topic: "topic-07"}}},
		{fmt.Sprintf("page %d via cursor", *deep), store.ListParams{Limit: 50, After: pos}},
		{"free-text search", store.ListParams{Limit: 50, Filter: redrive.Filter{Search: "order 1234 "}}},
		{"search: key prefix", store.ListParams{Limit: 50, Filter: redrive.Filter{KeyPrefix: []byte(ids[0].String()[:8])}}},
		{"search: event id", store.ListParams{Limit: 50, Filter: redrive.Filter{EventID: ids[0].String()}}},
		{"search: idempotence id", store.ListParams{Limit: 50, Filter: redrive.Filter{IdempotenceID: ids[0].String()}}},
		{"search: causing event id", store.ListParams{Limit: 50, Filter: redrive.Filter{CausingMessage: "order-" + ids[0].String()}}},
		{"search: trace id", store.ListParams{Limit: 50, Filter: redrive.Filter{TraceID: fmt.Sprintf("%032x", 4242)}}},
		{"search: stack-trace hash", store.ListParams{Limit: 50, Filter: redrive.Filter{StackTraceHash: fmt.Sprintf("%08x", 42)}}},
		{"search: no ticket", store.ListParams{Limit: 50, Filter: redrive.Filter{NoTicket: true}}},
		{"search: header name=value", store.ListParams{Limit: 50, Filter: redrive.Filter{HeaderName: "content-type", HeaderValue: []byte("application/json")}}},
		{"search: payload within one topic", store.ListParams{Limit: 50, Filter: redrive.Filter{Topic: "topic-07", Payload: []byte(`"customer":"c-4242"`)}}},
	} {
		plan, err := st.ExplainList(ctx, ex.p)
		if err != nil {
			return err
		}
		fmt.Printf("\nEXPLAIN (ANALYZE, BUFFERS) %s:\n%s\n", ex.name, apiIndent(plan))
	}
	return nil
}

// apiBenchClient sends authenticated GET requests to the API.
type apiBenchClient struct {
	base  string
	token string
	http  *http.Client
}

func (c *apiBenchClient) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if v == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// cursorOf walks the unfiltered list to the given page and returns its cursor.
func (c *apiBenchClient) cursorOf(ctx context.Context, page int) (string, time.Duration, error) {
	start := time.Now()
	cursor := ""
	for p := 1; p < page; p++ {
		var resp struct {
			NextCursor *string `json:"next_cursor"`
		}
		path := "/failures?limit=50"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if err := c.get(ctx, path, &resp); err != nil {
			return "", 0, err
		}
		if resp.NextCursor == nil {
			return "", 0, fmt.Errorf("the list ends before page %d", page)
		}
		cursor = *resp.NextCursor
	}
	return cursor, time.Since(start), nil
}

// measure sends 20 warm-up requests, then n measured ones, and returns the sorted latencies.
func (c *apiBenchClient) measure(ctx context.Context, n int, path func(int) string) ([]time.Duration, error) {
	for i := range 20 {
		if err := c.get(ctx, path(i), nil); err != nil {
			return nil, err
		}
	}
	lat := make([]time.Duration, n)
	for i := range n {
		start := time.Now()
		if err := c.get(ctx, path(i+20), nil); err != nil {
			return nil, err
		}
		lat[i] = time.Since(start)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat, nil
}

func apiPct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(0, min(len(sorted)-1, i-1))].Round(10 * time.Microsecond)
}

func apiIndent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

// apiBenchPosition finds the position after the given page by keyset, as the API's cursor
// holds it.
func apiBenchPosition(ctx context.Context, st *store.Store, page int) (*redrive.Position, error) {
	var after *redrive.Position
	for p := 1; p < page; p++ {
		rows, more, err := st.ListFailures(ctx, store.ListParams{Limit: 50, After: after})
		if err != nil {
			return nil, err
		}
		if !more {
			return nil, fmt.Errorf("the list ends before page %d", page)
		}
		pos := rows[len(rows)-1].Position()
		after = &pos
	}
	return after, nil
}

// seedAPIBench inserts the groups and n failures with COPY: states 10% RETRY_PENDING, 30%
// PERMANENT, 50% RESENT, 10% CLOSED; 20 topics, 50 services, 200 groups; a 512-byte JSON
// value, a UUID key, three headers and a 1.5 kB stack trace; created over 30 days.
func seedAPIBench(ctx context.Context, pool *pgxpool.Pool, n int) error {
	if _, err := pool.Exec(ctx, `
		INSERT INTO failure_groups (publisher_service, message_type, error_code, stack_trace_hash)
		SELECT 'service-' || lpad((g % $1)::text, 2, '0'), 'Type' || (g % 7),
			(ARRAY['DESERIALIZATION_FAILED','WRONG_EVENT_TYPE','UNKNOWN_EXCEPTION','TIMEOUT'])[1 + g % 4], md5(g::text)
		FROM generate_series(0, $2 - 1) AS g`, apiBenchServices, apiBenchGroups); err != nil {
		return fmt.Errorf("seed groups: %w", err)
	}
	groupRows, err := pool.Query(ctx, "SELECT id, publisher_service, message_type, error_code FROM failure_groups ORDER BY id")
	if err != nil {
		return err
	}
	type group struct {
		id                 int64
		service, typ, code string
	}
	groups, err := pgx.CollectRows(groupRows, func(r pgx.CollectableRow) (group, error) {
		var g group
		err := r.Scan(&g.id, &g.service, &g.typ, &g.code)
		return g, err
	})
	if err != nil {
		return err
	}
	src := &apiBenchRows{n: n, groups: make([][4]any, len(groups)), rng: rand.New(rand.NewPCG(1, 2)),
		start: time.Now().Add(-apiBenchDays * 24 * time.Hour)}
	for i, g := range groups {
		src.groups[i] = [4]any{g.id, g.service, g.typ, g.code}
	}
	src.stack = strings.Repeat("\tat ch.example.orders.OrderHandler.handle(OrderHandler.java:42)\n", 24)
	// Into the failures table of an older layout, or through the failures view (its trigger
	// writes the record, the state, the key and the stack trace once): the same rows either way.
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"failures"}, apiBenchColumns, src); err != nil {
		return fmt.Errorf("copy failures: %w", err)
	}
	vacuum := "VACUUM ANALYZE failure_records, failure_states, failure_keys, failure_texts"
	var oldLayout bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('failure_records') IS NULL").Scan(&oldLayout); err != nil {
		return err
	}
	if oldLayout { // a database before migration 020 (redrive-bench upgrade)
		vacuum = "VACUUM ANALYZE failures"
	}
	if _, err := pool.Exec(ctx, vacuum); err != nil {
		return err
	}
	_, err = pool.Exec(ctx, "VACUUM ANALYZE failure_groups")
	return err
}

// apiBenchBytesSQL sums pg_total_relation_size over the tables that hold failures: every
// partition of the records and states, the keys, the texts and the groups (or, on a database of
// the layout before migration 020, failures and failure_groups).
const apiBenchBytesSQL = `
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
  AND (c.relname IN ('failures', 'failure_groups', 'failure_keys', 'failure_texts')
       OR c.relname LIKE 'failure\_records\_%' OR c.relname LIKE 'failure\_states\_%')`

var apiBenchColumns = []string{"id", "state", "temporality", "error_code", "error_message", "stack_trace",
	"stack_trace_hash", "event_id", "idempotence_id", "event_created", "publisher_system", "publisher_service",
	"original_topic", "original_partition", "original_offset", "original_key", "original_value", "header_names",
	"header_values", "message_type", "causing_message", "attempt", "next_attempt_at", "closed_reason", "closed_by",
	"closed_at", "resent_at", "group_id", "created_at", "updated_at"}

// apiBenchRows generates the seeded rows for COPY (pgx.CopyFromSource).
type apiBenchRows struct {
	n, i   int
	groups [][4]any
	rng    *rand.Rand
	start  time.Time
	stack  string
	row    []any
}

func (b *apiBenchRows) Next() bool { b.i++; return b.i <= b.n }

func (b *apiBenchRows) Err() error { return nil }

func (b *apiBenchRows) Values() ([]any, error) {
	i := b.i
	g := b.groups[i%len(b.groups)]
	created := b.start.Add(time.Duration(i) * (apiBenchDays * 24 * time.Hour / time.Duration(b.n)))
	id := uuid.New()
	var (
		state, temporality       = "RESENT", "TEMPORARY"
		next, closedAt, resentAt *time.Time
		closedReason, closedBy   *string
	)
	switch r := b.rng.IntN(10); {
	case r == 0:
		state = "RETRY_PENDING"
		t := created.Add(time.Hour)
		next = &t
	case r <= 3:
		state, temporality = "PERMANENT", "PERMANENT"
	case r <= 8:
		t := created.Add(time.Minute)
		resentAt = &t
	default:
		state, temporality = "CLOSED", "UNKNOWN"
		reason, by := "known issue", "bench"
		t := created.Add(time.Hour)
		closedReason, closedBy, closedAt = &reason, &by, &t
	}
	value := fmt.Appendf(nil, `{"order_id":%d,"customer":"c-%d","items":[%s]}`, i, i%9973, strings.Repeat(`{"sku":"SKU-000000","qty":1},`, 14)+`{"sku":"end","qty":0}`)
	b.row = []any{id, state, temporality, g[3], fmt.Sprintf("failed to process order %d : %s in service %s", i, g[3], g[1]),
		b.stack, fmt.Sprintf("%08x", i%200), id.String(), id.String(), created, "shop", g[1],
		fmt.Sprintf("topic-%02d", i%apiBenchTopics), int32(i % 6), int64(i), []byte(id.String()), value,
		[]string{"trace-id", "content-type", "trace-id", "traceparent"}, [][]byte{[]byte("0af7651916cd43dd"), []byte("application/json"), []byte("b7ad6b71"),
			fmt.Appendf(nil, "00-%032x-00f067aa0ba902b7-01", i)},
		g[2], "order-" + id.String(), 1, next, closedReason, closedBy, closedAt, resentAt, g[0], created, created}
	return b.row, nil
}
