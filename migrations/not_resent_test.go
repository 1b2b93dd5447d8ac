package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/redrive/redrive/internal/testkit"
)

// notResentSQL reads failure_not_resent, and what it must hold (every failure_states row whose
// state is not RESENT), as text in one order.
const (
	notResentSQL = `SELECT coalesce(string_agg(row_to_json(x)::text, E'\n' ORDER BY x.id), '') FROM (
		SELECT id, created_at, group_id, temporality, original_topic, state, next_attempt_at FROM failure_not_resent) x`
	notResentWantSQL = `SELECT coalesce(string_agg(row_to_json(x)::text, E'\n' ORDER BY x.id), '') FROM (
		SELECT id, created_at, group_id, temporality, original_topic, state, next_attempt_at FROM failure_states
		WHERE state <> 'RESENT') x`
)

func checkNotResent(t *testing.T, db *sql.DB, when string) {
	t.Helper()
	var got, want string
	if err := db.QueryRow(notResentSQL).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(notResentWantSQL).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("%s: failure_not_resent\n%s\nwant\n%s", when, got, want)
	}
}

// Migration 026 moves a database in place: every failure reads the same through the view,
// failure_not_resent holds exactly the failures that are not RESENT (in a weekly partition and
// in the default one), no index of failure_states holds the state or a column of a mark, and
// the partitions keep half of each page free. Afterwards every change of state through the
// view, and by statements on failure_states, keeps failure_not_resent exact; a RESENT mark is a
// heap-only update. The down migration restores the indexes and drops the table.
func TestNotResentMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.EmptyPostgres(t).OpenSQL(t)
	p := migrateTo(t, db, 25)
	insert := func(state, createdAt string) {
		t.Helper()
		_, err := db.Exec(`
			WITH g AS (
				INSERT INTO failure_groups (publisher_service, error_code) VALUES ('svc', 'BOOM')
				ON CONFLICT ON CONSTRAINT failure_groups_kind_key DO UPDATE SET last_seen = now()
				RETURNING id)
			INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id,
				event_created, publisher_system, publisher_service, original_topic, original_partition,
				original_offset, original_key, original_value, header_names, header_values, causing_message,
				attempt, group_id, next_attempt_at, closed_reason, created_at)
			SELECT $1, 'TEMPORARY', 'BOOM', 'boom', gen_random_uuid()::text, gen_random_uuid()::text,
				now(), 'sys', 'svc', 't', 0, 1, NULL, ''::bytea, '{}', '{}', gen_random_uuid()::text, 1, g.id,
				CASE WHEN $1 = 'RETRY_PENDING' THEN now() END, CASE WHEN $1 = 'CLOSED' THEN 'done' END, $2::timestamptz
			FROM g`, state, createdAt)
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, at := range []string{"now", "2001-01-01"} {
		for _, state := range []string{"RETRY_PENDING", "PERMANENT", "RESENT", "CLOSED", "RESENT"} {
			insert(state, at)
		}
	}
	var before, after string
	if err := db.QueryRow(`SELECT md5(string_agg(row_to_json(f)::text, E'\n' ORDER BY f.id)) FROM failures f`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 26); err != nil {
		t.Fatalf("up to 26: %v", err)
	}
	if err := db.QueryRow(`SELECT md5(string_agg(row_to_json(f)::text, E'\n' ORDER BY f.id)) FROM failures f`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Error("the failures read differently after the migration")
	}
	var held int
	if err := db.QueryRow(`SELECT count(*) FROM failure_not_resent`).Scan(&held); err != nil || held != 6 {
		t.Errorf("failure_not_resent holds %d rows (%v), want 6", held, err)
	}
	checkNotResent(t, db, "after the migration")

	// No index of the states (of any partition) names state, next_attempt_at, resent_at or
	// updated_at, in its columns, expressions or predicate.
	var blocking []string
	rows, err := db.Query(`
		SELECT i.indexrelid::regclass::text FROM pg_index i
		JOIN pg_class c ON c.oid = i.indrelid
		WHERE (c.relname = 'failure_states' OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'failure_states'::regclass))
		  AND (EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		               AND a.attname IN ('state', 'next_attempt_at', 'resent_at', 'updated_at'))
		       OR pg_get_expr(i.indpred, i.indrelid) ~ '(state|next_attempt_at|resent_at|updated_at)'
		       OR pg_get_expr(i.indexprs, i.indrelid) ~ '(state|next_attempt_at|resent_at|updated_at)')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		blocking = append(blocking, name)
	}
	rows.Close()
	if len(blocking) > 0 {
		t.Errorf("indexes of failure_states that block a heap-only mark: %v", blocking)
	}
	var notHalf int
	if err := db.QueryRow(`
		SELECT count(*) FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
		WHERE h.inhparent = 'failure_states'::regclass AND NOT coalesce(c.reloptions @> '{fillfactor=50}', false)`).Scan(&notHalf); err != nil {
		t.Fatal(err)
	}
	if notHalf != 0 {
		t.Errorf("%d partitions of failure_states without fillfactor 50", notHalf)
	}

	// A RESENT mark by the store's statement: heap-only, and the row goes.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var part string
	if err := tx.QueryRow(`
		UPDATE failure_states SET state = 'RESENT', resent_at = now(), updated_at = now()
		WHERE id = (SELECT id FROM failure_states WHERE state = 'RETRY_PENDING' AND created_at > '2002-01-01')
		RETURNING tableoid::regclass::text`).Scan(&part); err != nil {
		t.Fatal(err)
	}
	var upd, hot int
	if err := tx.QueryRow(`SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = $1`, part).Scan(&upd, &hot); err != nil {
		t.Fatal(err)
	}
	if upd != 1 || hot != 1 {
		t.Errorf("the RESENT mark of %s: %d updates, %d heap-only, want 1 and 1", part, upd, hot)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkNotResent(t, db, "after a RESENT mark")

	for _, step := range []struct{ name, sql string }{
		{"a reopen", `UPDATE failure_states SET state = 'RETRY_PENDING', next_attempt_at = now() + interval '1 hour' WHERE state = 'RESENT'`},
		{"a retry's new time", `UPDATE failure_states SET next_attempt_at = next_attempt_at + interval '1 minute', resend_failures = resend_failures + 1 WHERE state = 'RETRY_PENDING'`},
		{"a close through the view", `UPDATE failures SET state = 'CLOSED', closed_reason = 'by hand' WHERE state = 'PERMANENT'`},
		{"a move by hand", `UPDATE failures SET created_at = created_at - interval '1 second' WHERE state = 'CLOSED' AND created_at > '2002-01-01'`},
		{"a mark of all", `UPDATE failure_states SET state = 'RESENT' WHERE state = 'RETRY_PENDING'`},
		{"a delete through the view", `DELETE FROM failures WHERE state = 'CLOSED' AND created_at < '2002-01-01'`},
		{"a delete", `DELETE FROM failure_states WHERE state = 'CLOSED'`},
	} {
		if _, err := db.Exec(step.sql); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		checkNotResent(t, db, "after "+step.name)
	}

	if _, err := p.DownTo(ctx, 25); err != nil {
		t.Fatalf("down to 25: %v", err)
	}
	if tableExists(t, db, "failure_not_resent") {
		t.Error("failure_not_resent still exists after the down migration")
	}
	for _, index := range []string{"failure_states_state_created_idx", "failure_states_group_state_idx", "failure_states_due_idx"} {
		if !tableExists(t, db, index) {
			t.Errorf("%s is missing after the down migration", index)
		}
	}
}
