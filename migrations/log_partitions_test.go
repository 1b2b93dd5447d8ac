package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/redrive/redrive/internal/testkit"
)

// logDigest reads the columns that audit_log and job_items had before migration 023, every
// row as text in key order, with the rows' count and the bytes of their variable columns.
type logDigest struct {
	entries, items        int64
	entryBytes, itemBytes int64
	entriesMD5, itemsMD5  string
}

func takeLogDigest(t *testing.T, db *sql.DB) logDigest {
	t.Helper()
	var d logDigest
	if err := db.QueryRow(`
		SELECT count(*), coalesce(sum(octet_length(action) + octet_length(principal) + coalesce(octet_length(reason), 0)
				+ coalesce(octet_length(details::text), 0)), 0),
			coalesce(md5(string_agg(row_to_json(x)::text, E'\n' ORDER BY x.id)), '')
		FROM (SELECT id, failure_id, group_id, action, principal, reason, details, at FROM audit_log) x`).
		Scan(&d.entries, &d.entryBytes, &d.entriesMD5); err != nil {
		t.Fatalf("digest of audit_log: %v", err)
	}
	if err := db.QueryRow(`
		SELECT count(*), coalesce(sum(coalesce(octet_length(outcome), 0) + coalesce(octet_length(detail), 0)), 0),
			coalesce(md5(string_agg(row_to_json(x)::text, E'\n' ORDER BY x.job_id, x.seq)), '')
		FROM (SELECT job_id, seq, failure_id, outcome, detail, done_at FROM job_items) x`).
		Scan(&d.items, &d.itemBytes, &d.itemsMD5); err != nil {
		t.Fatalf("digest of job_items: %v", err)
	}
	return d
}

// Migration 023 moves the audit log and the job items into partitioned tables in place: every
// entry and item reads the same before and after (count, bytes, every column), the audit ids
// go on after the highest, a job's entries get its id in job_id, each item its job's and its
// failure's created_at, rows of the failure tables' periods land in those periods' partitions
// and older ones in the default; the down migration restores the tables as they were.
func TestLogPartitionMigrationKeepsEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.EmptyPostgres(t).OpenSQL(t)
	p := migrateTo(t, db, 21)
	for _, q := range []string{
		`INSERT INTO failure_groups (publisher_service, message_type, error_code, stack_trace_hash) VALUES ('svc', 'T', 'E', 'h')`,
		`INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id, event_created,
			publisher_system, publisher_service, original_topic, original_partition, original_offset, original_value,
			causing_message, next_attempt_at, group_id, created_at, updated_at)
		 SELECT 'RETRY_PENDING', 'TEMPORARY', 'E', 'failed ' || i, 'ev-' || i, 'idem-' || i, now(), 'sys', 'svc', 'orders',
			0, i, '\x00ff'::bytea, 'cause-' || i, now(), (SELECT id FROM failure_groups LIMIT 1), now() - i * interval '1 hour', now()
		 FROM generate_series(1, 500) i`,
		`INSERT INTO jobs (id, action, state, principal, selection, rate_limit, token_hash, total, done, created_at, preview_expires_at, updated_at)
		 VALUES ('00000000-0000-0000-0000-000000000001', 'retry', 'DONE', 'otto', '{"ids":[]}', 10, '\x00', 400, 400, now() - interval '2 days', now(), now()),
		        ('00000000-0000-0000-0000-000000000002', 'close', 'RUNNING', 'otto', '{"ids":[]}', 10, '\x00', 100, 0, now() - interval '3 years', now(), now())`,
		`INSERT INTO job_items (job_id, seq, failure_id, outcome, detail, done_at)
		 SELECT '00000000-0000-0000-0000-000000000001', row_number() OVER (ORDER BY id), id,
			CASE WHEN original_offset % 7 = 0 THEN 'failed' ELSE 'done' END,
			CASE WHEN original_offset % 7 = 0 THEN 'broker down' END, now()
		 FROM (SELECT id, original_offset FROM failures ORDER BY id LIMIT 400) f`,
		`INSERT INTO job_items (job_id, seq, failure_id)
		 SELECT '00000000-0000-0000-0000-000000000002', i, gen_random_uuid() FROM generate_series(1, 100) i`,
		// Per-item entries of the job, entries of other actions, entries three years old.
		`INSERT INTO audit_log (failure_id, group_id, action, principal, reason, details, at)
		 SELECT failure_id, NULL, 'retry', 'otto', 'replay', jsonb_build_object('job_id', job_id, 'outcome', 'resent'), now() - interval '1 day'
		 FROM job_items WHERE outcome IS NOT NULL`,
		`INSERT INTO audit_log (failure_id, group_id, action, principal, reason, details, at)
		 SELECT NULL, (SELECT id FROM failure_groups LIMIT 1), 'group_edit', 'ann', NULL, jsonb_build_object('job_id', 'not-a-uuid', 'n', i),
			now() - interval '3 years' - i * interval '1 minute'
		 FROM generate_series(1, 50) i`,
		`INSERT INTO audit_log (action, principal, details) VALUES ('job_start', 'otto', '{"job_id": "00000000-0000-0000-0000-000000000001"}')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("seed: %v\n%s", err, q)
		}
	}
	before := takeLogDigest(t, db)
	if before.entries != 451 || before.items != 500 {
		t.Fatalf("seeded %d entries and %d items, want 451 and 500", before.entries, before.items)
	}

	if _, err := p.UpTo(ctx, 23); err != nil {
		t.Fatalf("up to 23: %v", err)
	}
	after := takeLogDigest(t, db)
	if after != before {
		t.Errorf("after the migration: %+v\nbefore: %+v", after, before)
	}
	var partitioned, withJob, itemsJobCreated, itemsFailureCreated, oldEntries, oldItems int
	if err := db.QueryRow(`SELECT
			(SELECT count(*) FROM pg_partitioned_table WHERE partrelid IN ('audit_log'::regclass, 'job_items'::regclass)),
			(SELECT count(*) FROM audit_log WHERE job_id = '00000000-0000-0000-0000-000000000001'),
			(SELECT count(*) FROM job_items i JOIN jobs j ON j.id = i.job_id AND j.created_at = i.created_at),
			(SELECT count(*) FROM job_items i JOIN failure_states s ON s.id = i.failure_id AND s.created_at = i.failure_created_at),
			(SELECT count(*) FROM audit_log_default), (SELECT count(*) FROM job_items_default)`).
		Scan(&partitioned, &withJob, &itemsJobCreated, &itemsFailureCreated, &oldEntries, &oldItems); err != nil {
		t.Fatal(err)
	}
	if partitioned != 2 || withJob != 401 || itemsJobCreated != 500 || itemsFailureCreated != 400 || oldEntries != 50 || oldItems != 100 {
		t.Errorf("partitioned tables %d (want 2), entries of the job %d (want 401), items with their job's created_at %d (want 500), "+
			"with their failure's %d (want 400), in the default partitions %d entries (want the 50 from three years ago), %d items (want 100)",
			partitioned, withJob, itemsJobCreated, itemsFailureCreated, oldEntries, oldItems)
	}
	var newID, maxOld int64
	if err := db.QueryRow(`SELECT max(id) FROM audit_log`).Scan(&maxOld); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`INSERT INTO audit_log (action, principal) VALUES ('probe', 'me') RETURNING id`).Scan(&newID); err != nil || newID <= maxOld {
		t.Errorf("a new entry's id = %d (%v), want above %d", newID, err, maxOld)
	}
	if _, err := db.Exec(`DELETE FROM audit_log WHERE action = 'probe'`); err != nil {
		t.Fatal(err)
	}

	if _, err := p.DownTo(ctx, 21); err != nil {
		t.Fatalf("down to 21: %v", err)
	}
	if down := takeLogDigest(t, db); down != before {
		t.Errorf("after the down migration: %+v\nbefore: %+v", down, before)
	}
}
