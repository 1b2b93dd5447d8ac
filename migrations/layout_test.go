package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/redrive/redrive/internal/testkit"
)

// failureDigestSQL reads every column of every failure as text (bytes in hex, arrays with
// their NULL elements), in id order: the same query on the table before migration 020 and on
// the view after it.
const failureDigestSQL = `
SELECT count(*), coalesce(md5(string_agg(row_to_json(x)::text, E'\n' ORDER BY x.id)), ''),
	coalesce(sum(octet_length(x.original_value)), 0) + coalesce(sum(octet_length(x.original_key)), 0) +
	coalesce(sum(octet_length(x.stack_trace)), 0)
FROM (SELECT id, state, temporality, error_code, error_message, error_description, stack_trace,
	stack_trace_hash, event_id, idempotence_id, event_created, publisher_system, publisher_service,
	process_id, original_topic, original_partition, original_offset, original_key, original_value,
	header_names, header_values, message_id, message_idempotence_id, message_created, message_system,
	message_service, message_type, message_type_version, causing_message, attempt, next_attempt_at,
	resend_failures, last_resend_error, resent_at, closed_reason, closed_by, closed_at, group_id,
	created_at, updated_at, state_reason, source_format, source_topic, source_partition, source_offset
	FROM failures) x`

type digest struct {
	failures, bytes int64
	failuresMD5     string
	tables          map[string]string
}

func takeDigest(t *testing.T, db *sql.DB) digest {
	t.Helper()
	d := digest{tables: map[string]string{}}
	if err := db.QueryRow(failureDigestSQL).Scan(&d.failures, &d.failuresMD5, &d.bytes); err != nil {
		t.Fatalf("digest of failures: %v", err)
	}
	for _, table := range []string{"failure_groups", "failure_revisions", "jobs", "job_items", "audit_log", "resend_claims"} {
		var n int64
		var sum string
		if err := db.QueryRow(`SELECT count(*), coalesce(md5(string_agg(row_to_json(t)::text, E'\n' ORDER BY row_to_json(t)::text)), '') FROM `+table+` t`).Scan(&n, &sum); err != nil {
			t.Fatalf("digest of %s: %v", table, err)
		}
		d.tables[table] = sum
		if n == 0 {
			t.Fatalf("%s is empty: the seed must fill it", table)
		}
	}
	return d
}

// Migration 020 moves a database of the former layout in place: every failure (record, state,
// stack trace), revision, job, job item, audit entry and claim reads the same before and after,
// byte for byte, and its down migration restores the table.
func TestLayoutMigrationKeepsEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.EmptyPostgres(t).OpenSQL(t)
	p := migrateTo(t, db, 19) // the layout every release before 020 left
	for _, q := range []string{
		`INSERT INTO failure_groups (publisher_service, message_type, error_code, stack_trace_hash, ticket)
		 SELECT 'svc-' || g, 'Type', 'E' || g, md5(g::text), CASE WHEN g = 1 THEN 'OPS-1' END FROM generate_series(1, 3) g`,
		// 300 failures of every state, shared and distinct stack traces, null and long keys,
		// tombstones, headers with a null value, foreign sources, some rows years old.
		`INSERT INTO failures (state, temporality, error_code, error_message, error_description, stack_trace,
			stack_trace_hash, event_id, idempotence_id, event_created, publisher_system, publisher_service, process_id,
			original_topic, original_partition, original_offset, original_key, original_value, header_names,
			header_values, message_id, message_type, causing_message, attempt, next_attempt_at, resend_failures,
			last_resend_error, resent_at, closed_reason, closed_by, closed_at, group_id, created_at, updated_at,
			state_reason, source_format, source_topic, source_partition, source_offset)
		 SELECT (ARRAY['RETRY_PENDING','PERMANENT','RESENT','CLOSED'])[1 + i % 4],
			(ARRAY['TEMPORARY','PERMANENT','UNKNOWN'])[1 + i % 3], 'E' || (1 + i % 3), 'failed ' || i,
			CASE WHEN i % 5 = 0 THEN 'description ' || i END,
			CASE WHEN i % 7 = 0 THEN NULL WHEN i % 2 = 0 THEN repeat(E'\tat Shared.frame(Shared.java:1)\n', 40)
				ELSE 'trace ' || (i % 9) || repeat(E'\tat Other.frame\n', 20) END,
			md5((i % 3)::text), 'ev-' || i, 'idem-' || i, now() - i * interval '1 minute', 'sys', 'svc-' || (1 + i % 3),
			CASE WHEN i % 2 = 0 THEN 'proc' END, 'topic-' || (i % 4), i % 6, i,
			CASE WHEN i % 10 = 0 THEN NULL WHEN i % 10 = 1 THEN decode(repeat('ab', 400), 'hex') ELSE convert_to('key-' || i, 'UTF8') END,
			CASE WHEN i % 11 = 0 THEN NULL ELSE convert_to('{"n":' || i || '}', 'UTF8') || '\x00ff'::bytea END,
			ARRAY['traceparent', 'empty', 'dup', 'dup'],
			ARRAY[convert_to('00-' || md5(i::text) || '-00f067aa0ba902b7-01', 'UTF8'), NULL, '\x01'::bytea, '\x02'::bytea],
			'msg-' || i, CASE WHEN i % 3 = 0 THEN 'OrderCreated' END, 'cause-' || (i / 2), 1 + i % 2,
			CASE WHEN i % 4 = 0 THEN now() + i * interval '1 second' END, i % 3,
			CASE WHEN i % 3 = 1 THEN 'broker down' END,
			CASE WHEN i % 4 = 2 THEN now() - interval '1 hour' END,
			CASE WHEN i % 4 = 3 THEN 'dup' END, CASE WHEN i % 4 = 3 THEN 'otto' END, CASE WHEN i % 4 = 3 THEN now() END,
			(SELECT id FROM failure_groups ORDER BY id OFFSET i % 3 LIMIT 1),
			CASE WHEN i % 50 = 0 THEN now() - interval '3 years' ELSE now() - i * interval '1 hour' END,
			now() - i * interval '1 second', CASE WHEN i % 4 = 1 THEN 'retries exhausted' END,
			(ARRAY['mpfe','spring','connect','streams','raw'])[1 + i % 5],
			CASE WHEN i % 5 <> 0 THEN 'dlt-' || i % 5 END, CASE WHEN i % 5 <> 0 THEN 0 END, CASE WHEN i % 5 <> 0 THEN i END
		 FROM generate_series(1, 300) i`,
		`INSERT INTO failure_revisions (failure_id, principal, reason, target_topic, key, value, header_names, header_values, created_at, outcome)
		 SELECT id, 'otto', 'fix', original_topic, original_key, convert_to('fixed', 'UTF8'), '{h}', ARRAY['\x01'::bytea], now(), 'resent'
		 FROM failures WHERE original_offset % 10 = 0`,
		`INSERT INTO jobs (id, action, state, principal, selection, rate_limit, token_hash, total, done, created_at, preview_expires_at, updated_at)
		 VALUES ('00000000-0000-0000-0000-000000000001', 'retry', 'DONE', 'otto', '{"ids":[]}', 10, '\x00', 20, 20, now(), now(), now())`,
		`INSERT INTO job_items (job_id, seq, failure_id, outcome, done_at)
		 SELECT '00000000-0000-0000-0000-000000000001', row_number() OVER (ORDER BY id), id, 'done', now()
		 FROM failures WHERE state = 'PERMANENT' LIMIT 20`,
		`INSERT INTO audit_log (failure_id, group_id, action, principal, reason, details, at)
		 SELECT id, group_id, 'close', 'otto', 'dup', jsonb_build_object('job_id', '00000000-0000-0000-0000-000000000001'), now()
		 FROM failures WHERE state = 'CLOSED'`,
		`INSERT INTO resend_claims (owner, claimed_at, lease_until, failure_ids)
		 SELECT 'instance-a', now(), now() + interval '1 minute', array_agg(id) FROM failures WHERE state = 'RETRY_PENDING'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("seed: %v\n%s", err, q)
		}
	}
	before := takeDigest(t, db)
	if before.failures != 300 {
		t.Fatalf("seeded %d failures, want 300", before.failures)
	}

	if _, err := p.UpTo(ctx, 20); err != nil {
		t.Fatalf("up to 20: %v", err)
	}
	after := takeDigest(t, db)
	if after.failures != before.failures || after.failuresMD5 != before.failuresMD5 || after.bytes != before.bytes {
		t.Errorf("failures after the migration: %d rows, %d bytes, digest %s; before: %d, %d, %s",
			after.failures, after.bytes, after.failuresMD5, before.failures, before.bytes, before.failuresMD5)
	}
	for table, sum := range before.tables {
		if after.tables[table] != sum {
			t.Errorf("%s changed in the migration", table)
		}
	}
	var texts, oldRows, keys int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM failure_texts), (SELECT count(*) FROM failure_records_default),
		(SELECT count(*) FROM failure_keys)`).Scan(&texts, &oldRows, &keys); err != nil {
		t.Fatal(err)
	}
	// One shared trace and nine distinct ones, each stored once.
	if texts != 10 || oldRows != 6 || keys != 300 {
		t.Errorf("%d texts (want 10), %d rows in the default partition (want the 6 from three years ago), %d keys (want 300)", texts, oldRows, keys)
	}

	if _, err := p.DownTo(ctx, 19); err != nil {
		t.Fatalf("down to 19: %v", err)
	}
	down := takeDigest(t, db)
	if down.failuresMD5 != before.failuresMD5 || down.bytes != before.bytes {
		t.Errorf("failures after the down migration differ from before the migration")
	}
}
