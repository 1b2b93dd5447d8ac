package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/redrive/redrive/migrations"
	"github.com/redrive/redrive/store"
)

func init() {
	commands["upgrade"] = benchUpgrade
	commands["retention"] = benchRetention
}

// layoutVersion is the last migration of the layout before the partitioned one (migration 020).
const layoutVersion = 14

// benchUpgrade seeds a database of the layout before migration 020 with the api benchmark's
// failures, revisions (1 in 100), a job over 10,000 of them and an audit entry per job item,
// then applies the pending migrations and prints their time, how long a reader of failures
// waited at most meanwhile, the stored bytes before and after, and whether every count and
// byte total is unchanged.
func benchUpgrade(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("upgrade", flag.ContinueOnError)
	var (
		n     = fs.Int("n", 1000000, "failures to seed")
		dbURL = scratchServerFlag(fs)
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 {
		return errors.New("-n must be positive")
	}
	pool, drop, err := scratchDatabaseAt(ctx, *dbURL, layoutVersion)
	if err != nil {
		return err
	}
	defer drop()
	start := time.Now()
	if err := seedAPIBench(ctx, pool, *n); err != nil {
		return err
	}
	for _, q := range []string{
		`INSERT INTO failure_revisions (failure_id, principal, reason, target_topic, key, value, header_names, header_values, created_at)
		 SELECT id, 'bench', 'fix', original_topic, original_key, original_value, header_names, header_values, now()
		 FROM failures WHERE original_offset % 100 = 0`,
		`INSERT INTO jobs (id, action, state, principal, selection, rate_limit, token_hash, total, done, created_at, preview_expires_at, updated_at)
		 VALUES ('00000000-0000-0000-0000-000000000001', 'retry', 'DONE', 'bench', '{"ids":[]}', 100, '\x00', 10000, 10000, now(), now(), now())`,
		`INSERT INTO job_items (job_id, seq, failure_id, outcome, done_at)
		 SELECT '00000000-0000-0000-0000-000000000001', row_number() OVER (ORDER BY id), id, 'done', now()
		 FROM (SELECT id FROM failures WHERE state = 'PERMANENT' LIMIT 10000) f`,
		`INSERT INTO audit_log (failure_id, action, principal, details, at)
		 SELECT failure_id, 'retry', 'bench', jsonb_build_object('job_id', job_id), now() FROM job_items`,
		`VACUUM ANALYZE`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	fmt.Printf("seeded %d failures at migration %d in %s\n", *n, layoutVersion, time.Since(start).Round(time.Second))
	before, err := upgradeTotals(ctx, pool)
	if err != nil {
		return err
	}

	// A reader of failures, every 100 ms, with its longest wait.
	var longest atomic.Int64
	probeCtx, stopProbe := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for probeCtx.Err() == nil {
			t0 := time.Now()
			var one int
			_ = pool.QueryRow(probeCtx, `SELECT 1 FROM failures LIMIT 1`).Scan(&one)
			if d := time.Since(t0); int64(d) > longest.Load() {
				longest.Store(int64(d))
			}
			select {
			case <-probeCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	db := stdlib.OpenDBFromPool(pool)
	start = time.Now()
	err = migrations.Up(ctx, db)
	took := time.Since(start)
	_ = db.Close()
	time.Sleep(300 * time.Millisecond) // the probe's next read, after the commit
	stopProbe()
	wg.Wait()
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return err
	}
	after, err := upgradeTotals(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Printf("migrated from %d to %d in %s; a reader of failures waited at most %s (writers wait for the whole migration)\n",
		layoutVersion, migrations.Latest(), took.Round(100*time.Millisecond), time.Duration(longest.Load()).Round(10*time.Millisecond))
	fmt.Printf("%-28s %16s %16s\n", "", "before", "after")
	same := true
	for _, k := range upgradeKeys {
		fmt.Printf("%-28s %16d %16d\n", k, before[k], after[k])
		if k != "stored bytes" && before[k] != after[k] {
			same = false
		}
	}
	fmt.Printf("%-28s %16.0f %16.0f\n", "stored bytes per failure", float64(before["stored bytes"])/float64(*n), float64(after["stored bytes"])/float64(*n))
	if !same {
		return errors.New("the counts or byte totals changed in the upgrade")
	}
	fmt.Println("every count and byte total is unchanged")
	return nil
}

var upgradeKeys = []string{"failures", "value+key+trace bytes", "header bytes", "revisions", "job items", "audit entries", "stored bytes"}

// upgradeTotals counts what the upgrade must keep; "failures" reads the table or the view.
func upgradeTotals(ctx context.Context, pool *pgxpool.Pool) (map[string]int64, error) {
	var v [7]int64
	err := pool.QueryRow(ctx, `
		SELECT count(*), coalesce(sum(octet_length(original_value)) + sum(octet_length(original_key)) + sum(octet_length(stack_trace)), 0),
			coalesce(sum((SELECT sum(octet_length(h)) FROM unnest(header_values) h)), 0),
			(SELECT count(*) FROM failure_revisions), (SELECT count(*) FROM job_items), (SELECT count(*) FROM audit_log)
		FROM failures`).Scan(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5])
	if err != nil {
		return nil, fmt.Errorf("totals: %w", err)
	}
	if err := pool.QueryRow(ctx, apiBenchBytesSQL).Scan(&v[6]); err != nil {
		return nil, fmt.Errorf("stored bytes: %w", err)
	}
	out := map[string]int64{}
	for i, k := range upgradeKeys {
		out[k] = v[i]
	}
	return out, nil
}

// benchRetention measures the retention of n expired failures both ways, each on a database of
// its own: the batched DELETE of the layout before migration 020 (1,000 rows a statement, the
// statement housekeeping ran, then the VACUUM that reclaims the rows), and the drop of their
// partition (store.DropExpiredPartitions). It prints the time and the WAL each wrote.
func benchRetention(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("retention", flag.ContinueOnError)
	var (
		n     = fs.Int("n", 200000, "expired failures")
		dbURL = scratchServerFlag(fs)
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 {
		return errors.New("-n must be positive")
	}
	const day = 24 * time.Hour
	now := time.Now()
	// One week, two months ago: what the retention of resolved failures (30 days) expired.
	week := int64(7 * day / time.Second)
	from := time.Unix(now.Add(-60*day).Unix()/week*week, 0).UTC()

	old, dropOld, err := scratchDatabaseAt(ctx, *dbURL, layoutVersion)
	if err != nil {
		return err
	}
	defer dropOld()
	if err := retentionSeed(ctx, old, *n, from, false); err != nil {
		return err
	}
	deleted, delTime, delWAL, err := retentionMeasure(ctx, old, func() (int64, error) {
		var total int64
		for {
			tag, err := old.Exec(ctx, `
				WITH doomed AS (
					SELECT id FROM failures
					WHERE state = 'RESENT' AND created_at < $1 AND coalesce(resent_at, updated_at) < $1
					ORDER BY created_at LIMIT 1000 FOR UPDATE SKIP LOCKED
				)
				DELETE FROM failures f USING doomed WHERE f.id = doomed.id`, now.Add(-30*day))
			if err != nil {
				return total, err
			}
			total += tag.RowsAffected()
			if tag.RowsAffected() < 1000 {
				return total, nil
			}
		}
	})
	if err != nil {
		return fmt.Errorf("batched delete: %w", err)
	}
	_, vacTime, vacWAL, err := retentionMeasure(ctx, old, func() (int64, error) {
		_, err := old.Exec(ctx, `VACUUM failures`)
		return 0, err
	})
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}

	// The same rows, stored at the older layout and migrated: the migration puts the week in a
	// partition of its own.
	cur, dropCur, err := scratchDatabaseAt(ctx, *dbURL, layoutVersion)
	if err != nil {
		return err
	}
	defer dropCur()
	if err := retentionSeed(ctx, cur, *n, from, false); err != nil {
		return err
	}
	if err := migrateAll(ctx, cur); err != nil {
		return err
	}
	if _, err := cur.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return err
	}
	st, err := store.New(store.Config{Pool: cur})
	if err != nil {
		return err
	}
	var parts []store.DroppedPartition
	dropped, dropTime, dropWAL, err := retentionMeasure(ctx, cur, func() (int64, error) {
		parts, err = st.DropExpiredPartitions(ctx, store.RetentionParams{Now: now, ResolvedAge: 30 * day, PermanentAge: 180 * day})
		var total int64
		for _, p := range parts {
			total += p.Dropped
		}
		return total, err
	})
	if err != nil {
		return fmt.Errorf("drop partition: %w", err)
	}
	var locked time.Duration
	for _, p := range parts {
		locked += p.Locked
	}
	fmt.Printf("retention of %d expired failures (RESENT 60 days ago, one week of created_at)\n", *n)
	fmt.Printf("| way | failures | time | WAL |\n|---|---|---|---|\n")
	fmt.Printf("| batched DELETE, 1,000 a statement (layout of migration %d) | %d | %s | %s |\n", layoutVersion, deleted, delTime.Round(10*time.Millisecond), mib(delWAL))
	fmt.Printf("| + the VACUUM that reclaims them | | %s | %s |\n", vacTime.Round(10*time.Millisecond), mib(vacWAL))
	fmt.Printf("| drop of their partition (store.DropExpiredPartitions) | %d | %s (tables locked %s) | %s |\n", dropped,
		dropTime.Round(time.Millisecond), locked.Round(time.Millisecond), mib(dropWAL))
	return nil
}

// migrateAll applies every pending migration to the database of pool.
func migrateAll(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return migrations.Up(ctx, db)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// retentionMeasure runs f after a checkpoint and returns what it returned, its time and the WAL
// bytes written meanwhile.
func retentionMeasure(ctx context.Context, pool *pgxpool.Pool, f func() (int64, error)) (int64, time.Duration, int64, error) {
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		return 0, 0, 0, err
	}
	var lsn0 string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn0); err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	n, err := f()
	took := time.Since(start)
	if err != nil {
		return 0, 0, 0, err
	}
	var wal int64
	if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint`, lsn0).Scan(&wal); err != nil {
		return 0, 0, 0, err
	}
	return n, took, wal, nil
}

// retentionSeed stores n RESENT failures resent 60 days ago, created over the week from from,
// with a 512-byte value and a shared 1.5 kB stack trace: in the failures table (an older
// layout) or through the view (the partitioned one, a trigger per row), then vacuumed.
func retentionSeed(ctx context.Context, pool *pgxpool.Pool, n int, from time.Time, partitioned bool) error {
	var group int64
	if err := pool.QueryRow(ctx, `INSERT INTO failure_groups (publisher_service, error_code) VALUES ('bench', 'E') RETURNING id`).Scan(&group); err != nil {
		return err
	}
	cols := `SELECT gen_random_uuid(), 'RESENT', 'TEMPORARY', 'E', 'failed ' || i, repeat(E'\tat ch.example.Orders.handle(Orders.java:42)\n', 32),
			'ev-' || i, 'idem-' || i, $2::timestamptz, 'sys', 'bench', 'orders', i % 6, i, convert_to('key-' || i, 'UTF8'),
			convert_to(rpad('{"order":' || i, 512, 'x'), 'UTF8'), ARRAY['traceparent'], ARRAY[convert_to('00-' || md5(i::text) || '-00f067aa0ba902b7-01', 'UTF8')],
			'cause-' || i, 1, $2::timestamptz + interval '1 minute', $3::bigint,
			$2::timestamptz + (i::float / $1) * interval '7 days', $2::timestamptz + interval '1 minute'
		FROM generate_series(1, $1) i`
	insert := `INSERT INTO failures (id, state, temporality, error_code, error_message, stack_trace, event_id, idempotence_id,
		event_created, publisher_system, publisher_service, original_topic, original_partition, original_offset, original_key,
		original_value, header_names, header_values, causing_message, attempt, resent_at, group_id, created_at, updated_at) `
	vacuum := `VACUUM ANALYZE failures`
	if partitioned {
		vacuum = `VACUUM ANALYZE failure_records, failure_states, failure_keys, failure_texts`
	}
	if _, err := pool.Exec(ctx, insert+cols, n, from, group); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	_, err := pool.Exec(ctx, vacuum)
	return err
}
