-- +goose Up

-- Indexes for the operators' API (docs/api.md). Every list query sorts by (created_at, id), so
-- each filter that deserves an index ends with those two columns.

-- GET /failures?group_id=…: a group's failures, newest first.
CREATE INDEX failures_group_created_idx ON failures (group_id, created_at, id);

-- GET /failures?key=…: exact key lookup. A hash index has no size limit on the key bytes
-- (a btree entry is limited to about 2.7 kB, which would make a long key fail its insert).
CREATE INDEX failures_key_idx ON failures USING hash (original_key);

-- GET /stats: counts by state, temporality, topic and publisher service come from an
-- index-only scan of this narrow index (deduplicated: a few MB per million rows) instead of the
-- wide table.
CREATE INDEX failures_stats_idx ON failures (state, temporality, original_topic, publisher_service);

-- GET /groups: newest activity first, keyset paging on (last_seen, id).
CREATE INDEX failure_groups_last_seen_idx ON failure_groups (last_seen, id);

-- GET /failures?q=…: free-text search over error_message with ILIKE '%…%'. A trigram index
-- serves it when the pg_trgm extension is available (it is part of PostgreSQL's contrib and
-- trusted, so the database owner may create it); without it the search still works, as a scan
-- bounded by the API's query timeout.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
        EXECUTE 'CREATE INDEX failures_error_message_trgm_idx ON failures USING gin (error_message gin_trgm_ops)';
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pg_trgm not installed (insufficient privilege): free-text search runs without an index';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX IF EXISTS failures_error_message_trgm_idx;
DROP INDEX failure_groups_last_seen_idx;
DROP INDEX failures_stats_idx;
DROP INDEX failures_key_idx;
DROP INDEX failures_group_created_idx;
