package migrations_test

import (
	"context"
	"testing"

	"github.com/redrive/redrive/internal/testkit"
)

// Migration 025 backfills the links of the parked failures stored before it: each is linked
// to the nearest causing message of its topic, partition and key, at an earlier first offset,
// whose latest failure is not parked (a parked record whose release failed for its own reason
// heads those after it); other keys, partitions and failures that are not parked get none.
// Its down migration drops the tables.
func TestFailureLinksBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.EmptyPostgres(t).OpenSQL(t)
	p := migrateTo(t, db, 21)
	insert := func(cause string, partition, offset, attempt int, key, code string) {
		t.Helper()
		_, err := db.Exec(`
			WITH g AS (
				INSERT INTO failure_groups (publisher_service, error_code) VALUES ('svc', $5)
				ON CONFLICT ON CONSTRAINT failure_groups_kind_key DO UPDATE SET last_seen = now()
				RETURNING id)
			INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id,
				event_created, publisher_system, publisher_service, original_topic, original_partition,
				original_offset, original_key, original_value, header_names, header_values, causing_message,
				attempt, group_id)
			SELECT 'PERMANENT', 'PERMANENT', $5, 'boom', gen_random_uuid()::text, gen_random_uuid()::text,
				now(), 'sys', 'svc', 't', $2, $3, convert_to($4, 'UTF8'), ''::bytea, '{}', '{}', $1, $6, g.id
			FROM g`, cause, partition, offset, key, code, attempt)
		if err != nil {
			t.Fatal(err)
		}
	}
	const parked = "PARKED_BEHIND"
	insert("H", 0, 10, 1, "K", "BOOM")
	insert("P11", 0, 11, 1, "K", parked)
	insert("N", 0, 12, 1, "K", parked)
	insert("N", 0, 40, 2, "K", "BOOM") // N's release failed for its own reason: N heads Q
	insert("Q", 0, 13, 1, "K", parked)
	insert("L", 0, 14, 1, "L", parked) // another key, no head stored
	insert("O", 1, 15, 1, "K", parked) // another partition, no head stored
	if _, err := p.UpTo(ctx, 25); err != nil {
		t.Fatalf("up to 25: %v", err)
	}
	got := map[string]string{}
	rows, err := db.Query(`SELECT f.causing_message || '@' || f.attempt, l.head FROM failure_links l JOIN failures f ON f.id = l.failure_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var f, h string
		if err := rows.Scan(&f, &h); err != nil {
			t.Fatal(err)
		}
		got[f] = h
	}
	want := map[string]string{"P11@1": "H", "N@1": "H", "Q@1": "N"}
	if len(got) != len(want) {
		t.Errorf("links %v, want %v", got, want)
	}
	for f, h := range want {
		if got[f] != h {
			t.Errorf("%s linked to %q, want %q (links %v)", f, got[f], h, got)
		}
	}
	if _, err := p.DownTo(ctx, 21); err != nil {
		t.Fatalf("down to 21: %v", err)
	}
	for _, table := range []string{"failure_links", "chain_releases"} {
		if tableExists(t, db, table) {
			t.Errorf("%s still exists after the down migration", table)
		}
	}
}
