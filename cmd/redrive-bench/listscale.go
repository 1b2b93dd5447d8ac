package main

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

func init() { commands["list-scale"] = benchListScale }

// Shape of the list-at-scale benchmark's failures.
const (
	scaleTopics   = 20
	scaleServices = 50
	scaleGroups   = 1000
	scaleCodes    = 8
)

// benchListScale loads n failures straight into the tables of the layout (COPY into
// failure_records, failure_states and failure_keys at once, with their indexes built after
// the load), spread over weekly partitions and groups, and measures p50/p99 of
// store.ListFailures for every indexed filter, first pages and pages after a keyset cursor.
func benchListScale(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("list-scale", flag.ContinueOnError)
	var (
		n        = fs.Int("n", 10000000, "failures to load")
		weeks    = fs.Int("weeks", 26, "weeks the failures' created_at spans (one partition per week)")
		requests = fs.Int("requests", 300, "measured lists per scenario")
		dbURL    = scratchServerFlag(fs)
		reuse    = fs.String("reuse", "", "URL of a database loaded by an earlier run with -keep; skips the load (-n must be the same)")
		keep     = fs.Bool("keep", false, "keep the loaded database and print its URL, for -reuse")
		explain  = fs.Bool("explain", false, "print the EXPLAIN (ANALYZE, BUFFERS) of each scenario's first list")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 || *weeks <= 0 || *requests <= 0 {
		return errors.New("-n, -weeks and -requests must be positive")
	}
	gen := newScaleGen(*n, *weeks)
	var pool *pgxpool.Pool
	if *reuse != "" {
		p, err := pgxpool.New(ctx, *reuse)
		if err != nil {
			return err
		}
		defer p.Close()
		pool = p
		var start time.Time
		if err := pool.QueryRow(ctx, "SELECT min(created_at) FROM failure_states").Scan(&start); err != nil {
			return err
		}
		gen.start = start
		// The groups were inserted in group order (gen.load).
		rows, err := pool.Query(ctx, "SELECT id FROM failure_groups ORDER BY id")
		if err != nil {
			return err
		}
		if gen.groupIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		if len(gen.groupIDs) != scaleGroups {
			return fmt.Errorf("list-scale: the database holds %d groups, not %d", len(gen.groupIDs), scaleGroups)
		}
	} else {
		p, drop, err := scratchDatabase(ctx, *dbURL)
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
		if err := gen.load(ctx, pool); err != nil {
			return err
		}
	}
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		return err
	}
	var rows, parts, bytes int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM failure_states),
		(SELECT count(*) FROM pg_inherits WHERE inhparent = 'failure_records'::regclass)`).Scan(&rows, &parts); err != nil {
		return err
	}
	if err := pool.QueryRow(ctx, apiBenchBytesSQL).Scan(&bytes); err != nil {
		return err
	}
	fmt.Printf("list-scale: %d failures in %d partitions of the records (and of the states), %d groups; %.0f bytes per failure over all failure tables\n",
		rows, parts, scaleGroups, float64(bytes)/float64(max(rows, 1)))
	fmt.Printf("%d lists per scenario (each with another value), limit 50, through store.ListFailures; p50/p99/max in ms\n\n", *requests)
	fmt.Println("| filter | first page p50 | p99 | max | next page (cursor) p50 | p99 | max |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, sc := range gen.scenarios() {
		var first, next []time.Duration
		for i := range *requests + 40 {
			p := store.ListParams{Limit: 50, Filter: sc.filter(i)}
			t0 := time.Now()
			page, more, err := st.ListFailures(ctx, p)
			d := time.Since(t0)
			if err != nil {
				return fmt.Errorf("%s: %w", sc.name, err)
			}
			if i >= 40 { // the first 40 warm the pool's connections (16) and their plans
				first = append(first, d)
			}
			if !more {
				continue
			}
			pos := page[len(page)-1].Position()
			p.After = &pos
			t0 = time.Now()
			if _, _, err := st.ListFailures(ctx, p); err != nil {
				return fmt.Errorf("%s, next page: %w", sc.name, err)
			}
			if d := time.Since(t0); i >= 40 {
				next = append(next, d)
			}
		}
		fmt.Printf("| %s | %s | %s |\n", sc.name, scalePcts(first), scalePcts(next))
		if *explain {
			plan, err := st.ExplainList(ctx, store.ListParams{Limit: 50, Filter: sc.filter(7)})
			if err != nil {
				return err
			}
			fmt.Printf("\n%s\n\n", apiIndent(plan))
		}
	}
	return nil
}

func scalePcts(d []time.Duration) string {
	if len(d) == 0 {
		return "– | – | –"
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	ms := func(p int) string { return fmt.Sprintf("%.2f", float64(apiPct(d, p))/float64(time.Millisecond)) }
	return ms(50) + " | " + ms(99) + " | " + ms(100)
}

// scaleGen generates the i-th failure of the benchmark, the same on every call, so that the
// three tables are loaded at once and the searches know values that exist.
type scaleGen struct {
	n     int
	weeks int
	start time.Time
	step  time.Duration
	stack string
	// groupIDs holds the database id of each group, by group number.
	groupIDs []int64
}

func newScaleGen(n, weeks int) *scaleGen {
	span := time.Duration(weeks) * 7 * 24 * time.Hour
	return &scaleGen{
		n: n, weeks: weeks,
		start: time.Now().Add(-span).Truncate(time.Second),
		step:  (span / time.Duration(n)).Truncate(time.Microsecond),
		stack: strings.Repeat("\tat ch.example.orders.OrderHandler.handle(OrderHandler.java:42)\n", 24),
	}
}

// id returns the failure id (kind 0) or the idempotence id (kind 1) of failure i, as the load
// writes them: md5(i::text)::uuid and md5('k' || i)::uuid.
func (g *scaleGen) id(i, kind int) uuid.UUID {
	prefix := ""
	if kind == 1 {
		prefix = "k"
	}
	return uuid.UUID(md5.Sum([]byte(prefix + strconv.Itoa(i))))
}

func (g *scaleGen) group(i int) int { return int(uint(i*7919) % scaleGroups) }

func (g *scaleGen) topic(i int) string { return fmt.Sprintf("topic-%02d", i%scaleTopics) }

func (g *scaleGen) code(grp int) string { return fmt.Sprintf("CODE_%d", grp%scaleCodes) }

func (g *scaleGen) service(grp int) string { return fmt.Sprintf("service-%02d", grp%scaleServices) }

func (g *scaleGen) traceID(i int) string {
	h := md5.Sum([]byte("t" + strconv.Itoa(i)))
	return hex.EncodeToString(h[:])
}

func (g *scaleGen) stackHash(grp int) string { return fmt.Sprintf("%08x", grp) }

// load creates the groups, texts and partitions, drops the indexes of the failure tables, loads
// the failures straight into the records, states and keys (each chunk generated by the server
// with generate_series, the same rows scaleGen describes, two chunks at once), builds the
// indexes again and vacuums.
func (g *scaleGen) load(ctx context.Context, pool *pgxpool.Pool) error {
	t0 := time.Now()
	weekS := int64(7 * 86400)
	parts := 0
	for lo := (g.start.Unix() / weekS) * weekS; lo <= time.Now().Unix()+4*weekS; lo += weekS {
		if _, err := pool.Exec(ctx, "SELECT redrive_create_partitions(to_timestamp($1), to_timestamp($2))", lo, lo+weekS); err != nil {
			return fmt.Errorf("create partitions: %w", err)
		}
		parts++
	}
	traceRef := sha256.Sum256([]byte(g.stack))
	if _, err := pool.Exec(ctx, `INSERT INTO failure_texts (hash, body, last_used) VALUES ($1, $2, now())`, traceRef[:], g.stack); err != nil {
		return err
	}
	g.groupIDs = make([]int64, scaleGroups)
	for grp := range scaleGroups {
		if err := pool.QueryRow(ctx, `INSERT INTO failure_groups (publisher_service, message_type, error_code, stack_trace_hash, first_seen, last_seen)
			VALUES ($1, $2, $3, $4, $5, now()) RETURNING id`, g.service(grp), fmt.Sprintf("Type%d", grp%7), g.code(grp), g.stackHash(grp), g.start).Scan(&g.groupIDs[grp]); err != nil {
			return fmt.Errorf("insert group: %w", err)
		}
	}
	// The indexes and primary keys of the three tables, to build again after the load.
	rows, err := pool.Query(ctx, `
		SELECT format('ALTER TABLE %s DROP CONSTRAINT %I', conrelid::regclass, conname),
			format('ALTER TABLE %s ADD CONSTRAINT %I %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
		FROM pg_constraint WHERE contype = 'p' AND conrelid IN ('failure_records'::regclass, 'failure_states'::regclass, 'failure_keys'::regclass)
		UNION ALL
		SELECT format('DROP INDEX %s', i.indexrelid::regclass), pg_get_indexdef(i.indexrelid)
		FROM pg_index i WHERE i.indrelid IN ('failure_records'::regclass, 'failure_states'::regclass, 'failure_keys'::regclass)
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`)
	if err != nil {
		return err
	}
	type ddl struct{ drop, create string }
	ddls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ddl, error) {
		var d ddl
		return d, r.Scan(&d.drop, &d.create)
	})
	if err != nil {
		return err
	}
	for _, d := range ddls {
		if _, err := pool.Exec(ctx, d.drop); err != nil {
			return fmt.Errorf("%s: %w", d.drop, err)
		}
	}
	fmt.Printf("load: %d groups, %d weekly partitions, %d indexes and keys dropped in %s\n", scaleGroups, parts, len(ddls), time.Since(t0).Round(time.Second))

	t1 := time.Now()
	const chunk = 200000
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(2)
	stepUS := g.step.Microseconds()
	for from := 0; from < g.n; from += chunk {
		to := min(from+chunk, g.n)
		eg.Go(func() error {
			tx, err := pool.Begin(ectx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			if _, err := tx.Exec(ectx, "SET LOCAL synchronous_commit = off"); err != nil {
				return err
			}
			if _, err := tx.Exec(ectx, scaleRecordsSQL, from, to, g.start, stepUS, traceRef[:]); err != nil {
				return fmt.Errorf("insert records: %w", err)
			}
			if _, err := tx.Exec(ectx, scaleStatesSQL, from, to, g.start, stepUS, g.groupIDs); err != nil {
				return fmt.Errorf("insert states: %w", err)
			}
			if _, err := tx.Exec(ectx, scaleKeysSQL, from, to, g.start, stepUS); err != nil {
				return fmt.Errorf("insert keys: %w", err)
			}
			return tx.Commit(ectx)
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	copied := time.Since(t1)
	fmt.Printf("load: %d failures (records, states, keys) written in %s (%.0f failures/s)\n", g.n, copied.Round(time.Second), float64(g.n)/copied.Seconds())

	t2 := time.Now()
	eg, ectx = errgroup.WithContext(ctx)
	eg.SetLimit(2)
	for _, d := range ddls {
		eg.Go(func() error {
			// pg_get_indexdef names a partitioned table ON ONLY: the index of every partition is
			// wanted.
			create := strings.Replace(d.create, " ON ONLY ", " ON ", 1)
			if _, err := pool.Exec(ectx, "SET maintenance_work_mem = '512MB'; "+create); err != nil {
				return fmt.Errorf("%s: %w", d.create, err)
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	fmt.Printf("load: %d indexes and keys built in %s\n", len(ddls), time.Since(t2).Round(time.Second))
	t3 := time.Now()
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) failure_records, failure_states, failure_not_resent, failure_keys, failure_texts, failure_groups"); err != nil {
		return err
	}
	fmt.Printf("load: VACUUM ANALYZE in %s; %d failures loaded in %s in all\n", time.Since(t3).Round(time.Second), g.n, time.Since(t0).Round(time.Second))
	return nil
}

// The rows of failures $1 to $2 - 1, as scaleGen describes them: created_at $3 + i × $4 µs.
// id(i) is md5(i::text)::uuid, the idempotence id md5('k' || i)::uuid.
const (
	scaleRecordsSQL = `
INSERT INTO failure_records (id, created_at, temporality, error_code, error_message, stack_trace_ref,
	stack_trace_hash, event_id, idempotence_id, event_created, publisher_system, publisher_service,
	original_topic, original_partition, original_offset, original_key, original_value, header_names,
	header_values, message_type, causing_message, attempt, source_format, source_topic, source_partition, source_offset)
SELECT u.id, u.c, CASE WHEN u.r = 0 OR (u.r BETWEEN 4 AND 8) THEN 'TEMPORARY' WHEN u.r <= 3 THEN 'PERMANENT' ELSE 'UNKNOWN' END,
	'CODE_' || (u.g % 8),
	'failed to process order ' || i || ' : CODE_' || (u.g % 8) || ' in service service-' || lpad((u.g % 50)::text, 2, '0'),
	$5, lpad(to_hex(u.g), 8, '0'), u.id::text, md5('k' || i)::uuid::text, u.c, 'shop', 'service-' || lpad((u.g % 50)::text, 2, '0'),
	'topic-' || lpad((i % 20)::text, 2, '0'), i % 6, i, convert_to(u.id::text, 'UTF8'),
	convert_to('{"order_id":' || i || ',"customer":"c-' || (i % 9973) || '","items":[' || repeat('{"sku":"SKU-000000","qty":1},', 14) || '{"sku":"end","qty":0}]}', 'UTF8'),
	ARRAY['trace-id', 'content-type', 'trace-id', 'traceparent'],
	ARRAY['0af7651916cd43dd'::bytea, 'application/json'::bytea, 'b7ad6b71'::bytea, convert_to('00-' || md5('t' || i) || '-00f067aa0ba902b7-01', 'UTF8')],
	'Type' || (u.g % 7), 'order-' || u.id::text, 1,
	CASE WHEN i % 20 = 7 THEN 'spring' ELSE 'mpfe' END, CASE WHEN i % 20 = 7 THEN 'orders-dlt' ELSE 'errors' END, i % 3, i
FROM generate_series($1::bigint, $2::bigint - 1) AS i
CROSS JOIN LATERAL (SELECT md5(i::text)::uuid AS id, $3::timestamptz + (i * $4::bigint) * interval '1 microsecond' AS c,
	(i * 7919) % 1000 AS g, (i * 2654435761) % 10 AS r) u`
	scaleStatesSQL = `
INSERT INTO failure_states (id, created_at, group_id, temporality, original_topic, state, next_attempt_at,
	resent_at, closed_reason, closed_by, closed_at, updated_at)
SELECT u.id, u.c, ($5::bigint[])[u.g + 1],
	CASE WHEN u.r = 0 OR (u.r BETWEEN 4 AND 8) THEN 'TEMPORARY' WHEN u.r <= 3 THEN 'PERMANENT' ELSE 'UNKNOWN' END,
	'topic-' || lpad((i % 20)::text, 2, '0'),
	CASE WHEN u.r = 0 THEN 'RETRY_PENDING' WHEN u.r <= 3 THEN 'PERMANENT' WHEN u.r <= 8 THEN 'RESENT' ELSE 'CLOSED' END,
	CASE WHEN u.r = 0 THEN u.c + interval '1 hour' END,
	CASE WHEN u.r BETWEEN 4 AND 8 THEN u.c + interval '1 minute' END,
	CASE WHEN u.r = 9 THEN 'known issue' END, CASE WHEN u.r = 9 THEN 'bench' END,
	CASE WHEN u.r = 9 THEN u.c + interval '1 hour' END, u.c
FROM generate_series($1::bigint, $2::bigint - 1) AS i
CROSS JOIN LATERAL (SELECT md5(i::text)::uuid AS id, $3::timestamptz + (i * $4::bigint) * interval '1 microsecond' AS c,
	(i * 7919) % 1000 AS g, (i * 2654435761) % 10 AS r) u`
	scaleKeysSQL = `
INSERT INTO failure_keys (idempotence_id, failure_id, created_at)
SELECT md5('k' || i)::uuid::text, md5(i::text)::uuid, $3::timestamptz + (i * $4::bigint) * interval '1 microsecond'
FROM generate_series($1::bigint, $2::bigint - 1) AS i`
)

// scaleScenario is one filter of the list, with another value for each request i.
type scaleScenario struct {
	name   string
	filter func(i int) store.Filter
}

// scenarios are the indexed filters and the combinations the UI uses.
func (g *scaleGen) scenarios() []scaleScenario {
	pick := func(i int) int { return int(uint64(i)*0x9e3779b97f4a7c15>>20) % g.n }
	day := 24 * time.Hour
	span := time.Duration(g.weeks) * 7 * day
	window := func(i int) (time.Time, time.Time) {
		from := g.start.Add(time.Duration(pick(i)%int(span/day)) * day)
		return from, from.Add(day)
	}
	states := []store.State{store.StatePermanent, store.StateRetryPending, store.StateClosed, store.StateResent}
	return []scaleScenario{
		{"none (newest first)", func(int) store.Filter { return store.Filter{} }},
		{"state", func(i int) store.Filter { return store.Filter{States: []store.State{states[i%4]}} }},
		{"state RETRY_PENDING + PERMANENT (open)", func(int) store.Filter {
			return store.Filter{States: []store.State{store.StateRetryPending, store.StatePermanent}}
		}},
		{"topic", func(i int) store.Filter { return store.Filter{Topic: g.topic(i)} }},
		{"state + topic", func(i int) store.Filter {
			return store.Filter{States: []store.State{states[i%4]}, Topic: g.topic(i)}
		}},
		{"group", func(i int) store.Filter { return store.Filter{GroupID: g.groupIDs[i%scaleGroups]} }},
		{"group + state", func(i int) store.Filter {
			return store.Filter{GroupID: g.groupIDs[i%scaleGroups], States: []store.State{states[i%4]}}
		}},
		{"error code", func(i int) store.Filter { return store.Filter{ErrorCode: g.code(i)} }},
		{"temporality", func(int) store.Filter { return store.Filter{Temporalities: []avro.Temporality{avro.Permanent}} }},
		{"source format (spring, 1 in 20)", func(int) store.Filter {
			return store.Filter{SourceFormats: []store.SourceFormat{store.SourceSpring}}
		}},
		{"source topic (1 in 20)", func(int) store.Filter { return store.Filter{SourceTopic: "orders-dlt"} }},
		{"time range (one day)", func(i int) store.Filter {
			from, to := window(i)
			return store.Filter{CreatedFrom: from, CreatedTo: to}
		}},
		{"time range (one day) + state", func(i int) store.Filter {
			from, to := window(i)
			return store.Filter{CreatedFrom: from, CreatedTo: to, States: []store.State{states[i%4]}}
		}},
		{"key (exact)", func(i int) store.Filter { return store.Filter{Key: []byte(g.id(pick(i), 0).String())} }},
		{"key prefix (8 bytes)", func(i int) store.Filter {
			return store.Filter{KeyPrefix: []byte(g.id(pick(i), 0).String()[:8])}
		}},
		{"trace id", func(i int) store.Filter { return store.Filter{TraceID: g.traceID(pick(i))} }},
		{"event id", func(i int) store.Filter { return store.Filter{EventID: g.id(pick(i), 0).String()} }},
		{"idempotence id", func(i int) store.Filter { return store.Filter{IdempotenceID: g.id(pick(i), 1).String()} }},
		{"causing event id", func(i int) store.Filter {
			return store.Filter{CausingMessage: "order-" + g.id(pick(i), 0).String()}
		}},
		{"stack-trace hash", func(i int) store.Filter { return store.Filter{StackTraceHash: g.stackHash(i % scaleGroups)} }},
		{"no ticket", func(int) store.Filter { return store.Filter{NoTicket: true} }},
		{"header name=value", func(int) store.Filter {
			return store.Filter{HeaderName: "content-type", HeaderValue: []byte("application/json")}
		}},
	}
}
