package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/redrive/redrive/internal/testkit"
)

// Migration 022 names the cluster of every failure: the rows stored before it are from the one
// cluster a deployment had, 'default'; the view failures carries the column and its trigger
// writes it; the down migration restores the view of 020 with every failure still readable.
func TestClustersMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.EmptyPostgres(t).OpenSQL(t)
	p := migrateTo(t, db, 21)
	for _, q := range []string{
		`INSERT INTO failure_groups (publisher_service, message_type, error_code, stack_trace_hash) VALUES ('svc', 'T', 'E', '')`,
		`INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id, event_created,
			publisher_system, publisher_service, original_topic, original_partition, original_offset, original_value,
			causing_message, group_id)
		 SELECT 'PERMANENT', 'PERMANENT', 'E', 'failed ' || i, 'ev-' || i, 'idem-' || i, now(), 'sys', 'svc', 'orders', 0, i,
			'\x01'::bytea, 'cause-' || i, (SELECT id FROM failure_groups LIMIT 1)
		 FROM generate_series(1, 20) i`,
		`INSERT INTO dlt_reactivations (topic, principal, up_to_now, state, started_at, updated_at)
		 VALUES ('redrive.dlt', 'otto', true, 'DONE', now(), now())`,
		`INSERT INTO dlt_reactivation_positions (topic, partition, next_offset, updated_at) VALUES ('redrive.dlt', 0, 7, now())`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("seed: %v\n%s", err, q)
		}
	}
	before := takeDigest20(t, db)
	if _, err := p.UpTo(ctx, 22); err != nil {
		t.Fatalf("up to 22: %v", err)
	}
	var n, other int
	if err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE cluster <> 'default') FROM failures`).Scan(&n, &other); err != nil {
		t.Fatal(err)
	}
	if n != 20 || other != 0 {
		t.Fatalf("after 022: %d failures, %d not from 'default'; want 20, 0", n, other)
	}
	if after := takeDigest20(t, db); after != before {
		t.Errorf("the columns of 020 changed in the migration")
	}
	var runCluster, posCluster string
	if err := db.QueryRow(`SELECT (SELECT cluster FROM dlt_reactivations), (SELECT cluster FROM dlt_reactivation_positions)`).Scan(&runCluster, &posCluster); err != nil {
		t.Fatal(err)
	}
	if runCluster != "default" || posCluster != "default" {
		t.Errorf("reactivation run of cluster %q, position of %q; want default", runCluster, posCluster)
	}

	// The view's trigger writes the cluster, and defaults it.
	for _, q := range []string{
		`INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id, event_created,
			publisher_system, publisher_service, original_topic, original_partition, original_offset, original_value,
			causing_message, group_id, cluster)
		 VALUES ('PERMANENT', 'PERMANENT', 'E', 'by hand', 'ev-eu', 'idem-eu', now(), 'sys', 'svc', 'orders', 0, 1, '\x01'::bytea,
			'cause-eu', (SELECT id FROM failure_groups LIMIT 1), 'eu')`,
		`INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id, event_created,
			publisher_system, publisher_service, original_topic, original_partition, original_offset, original_value,
			causing_message, group_id)
		 VALUES ('PERMANENT', 'PERMANENT', 'E', 'by hand', 'ev-x', 'idem-x', now(), 'sys', 'svc', 'orders', 0, 2, '\x01'::bytea,
			'cause-x', (SELECT id FROM failure_groups LIMIT 1))`,
		`INSERT INTO dlt_reactivation_positions (cluster, topic, partition, next_offset, updated_at) VALUES ('eu', 'redrive.dlt', 0, 3, now())`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("insert after 022: %v\n%s", err, q)
		}
	}
	var eu, def string
	if err := db.QueryRow(`SELECT (SELECT cluster FROM failure_records WHERE idempotence_id = 'idem-eu'),
		(SELECT cluster FROM failures WHERE idempotence_id = 'idem-x')`).Scan(&eu, &def); err != nil {
		t.Fatal(err)
	}
	if eu != "eu" || def != "default" {
		t.Errorf("inserted through the view: clusters %q and %q, want eu and default", eu, def)
	}
	if _, err := db.Exec(`UPDATE failures SET cluster = 'us' WHERE idempotence_id = 'idem-eu'`); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT cluster FROM failure_records WHERE idempotence_id = 'idem-eu'`).Scan(&eu); err != nil || eu != "us" {
		t.Errorf("updated through the view: cluster %q (%v), want us", eu, err)
	}

	if _, err := p.DownTo(ctx, 21); err != nil {
		t.Fatalf("down to 21: %v", err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM failures`).Scan(&n); err != nil || n != 22 {
		t.Errorf("after the down migration: %d failures (%v), want 22", n, err)
	}
	if _, err := p.UpTo(ctx, 22); err != nil {
		t.Fatalf("up to 22 again: %v", err)
	}
}

// takeDigest20 digests the columns of the view of migration 020 (failureDigestSQL).
func takeDigest20(t *testing.T, db *sql.DB) string {
	t.Helper()
	var n, size int64
	var sum string
	if err := db.QueryRow(failureDigestSQL).Scan(&n, &sum, &size); err != nil {
		t.Fatalf("digest of failures: %v", err)
	}
	return fmt.Sprint(n, sum, size)
}
