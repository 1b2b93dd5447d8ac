-- +goose Up

-- Marks that rewrite no index (docs/operations.md, "Storage layout"; docs/benchmarks.md,
-- "Heap-only marks"). Every change of state of a failure updated its
-- failure_states row, and since three of the states' five indexes held the state (the state's
-- list index, the counts index and the due index, whose predicate names it), no mark was a
-- heap-only update: each wrote a new entry into the primary key and into every secondary index
-- that took its new row. The RESENT mark of the scheduler and of the jobs was the largest
-- database cost of a resent failure. Now no index of failure_states holds the state, a
-- next attempt or any column a mark changes, and its partitions keep half of each page free:
-- a mark is a heap-only (HOT) update, which writes the new row version next to the old one
-- and no index entry.
--
-- What the indexes of the state gave moves to failure_not_resent, one narrow row per failure
-- that is not RESENT (RETRY_PENDING, PERMANENT or CLOSED), kept in the same statement as the
-- change of failure_states by statement-level triggers over its transition tables: a mark to
-- RESENT deletes the row (a delete writes no index entry), a reopen inserts it again. Its
-- indexes serve the due claim, the lists and counts of those states, and the counts by group;
-- a list of RESENT failures walks the records in created order and reads their states. RESENT
-- counts are the totals of failure_states less the failures of the other states.
--
-- The fill factor applies to pages written after it is set: in an existing database the
-- partitions' existing pages stay full until their rows move (docs/operations.md).

CREATE TABLE failure_not_resent (
    id              uuid        NOT NULL,
    created_at      timestamptz NOT NULL,
    group_id        bigint      NOT NULL,
    temporality     text        NOT NULL,
    original_topic  text        NOT NULL,
    state           text        NOT NULL,
    next_attempt_at timestamptz,
    CONSTRAINT failure_not_resent_pkey PRIMARY KEY (created_at, id),
    CONSTRAINT failure_not_resent_state_check CHECK (state IN ('RETRY_PENDING', 'PERMANENT', 'CLOSED'))
);
COMMENT ON TABLE failure_not_resent IS 'The failures whose state is not RESENT, with the columns of failure_states their lists, counts and the due claim read; written only by the triggers of failure_states (and by retention, which drops partitions).';
COMMENT ON COLUMN failure_not_resent.state IS 'failure_states.state of the failure: RETRY_PENDING, PERMANENT or CLOSED.';

INSERT INTO failure_not_resent (id, created_at, group_id, temporality, original_topic, state, next_attempt_at)
SELECT id, created_at, group_id, temporality, original_topic, state, next_attempt_at
FROM failure_states WHERE state <> 'RESENT';

CREATE INDEX failure_not_resent_state_idx ON failure_not_resent (state, created_at, id);
-- A group's counts by state, temporality and topic, and its lists by state, from this index.
CREATE INDEX failure_not_resent_group_idx ON failure_not_resent (group_id, state, created_at, id)
    INCLUDE (temporality, original_topic);
CREATE INDEX failure_not_resent_due_idx ON failure_not_resent (next_attempt_at, id) INCLUDE (created_at)
    WHERE state = 'RETRY_PENDING';

-- +goose StatementBegin
CREATE FUNCTION redrive_not_resent_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO failure_not_resent AS x (id, created_at, group_id, temporality, original_topic, state, next_attempt_at)
    SELECT n.id, n.created_at, n.group_id, n.temporality, n.original_topic, n.state, n.next_attempt_at
    FROM new_rows n WHERE n.state <> 'RESENT'
    ON CONFLICT (created_at, id) DO UPDATE SET group_id = EXCLUDED.group_id, temporality = EXCLUDED.temporality,
        original_topic = EXCLUDED.original_topic, state = EXCLUDED.state, next_attempt_at = EXCLUDED.next_attempt_at;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION redrive_not_resent_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Rows that became RESENT, or moved (a new id or created_at, by hand), go.
    DELETE FROM failure_not_resent x USING old_rows o
    WHERE x.created_at = o.created_at AND x.id = o.id
      AND NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.id = o.id AND n.created_at = o.created_at AND n.state <> 'RESENT');
    -- Rows of the other states are written when a column of failure_not_resent changed.
    INSERT INTO failure_not_resent AS x (id, created_at, group_id, temporality, original_topic, state, next_attempt_at)
    SELECT n.id, n.created_at, n.group_id, n.temporality, n.original_topic, n.state, n.next_attempt_at
    FROM new_rows n WHERE n.state <> 'RESENT'
    ON CONFLICT (created_at, id) DO UPDATE SET group_id = EXCLUDED.group_id, temporality = EXCLUDED.temporality,
        original_topic = EXCLUDED.original_topic, state = EXCLUDED.state, next_attempt_at = EXCLUDED.next_attempt_at
    WHERE (x.group_id, x.temporality, x.original_topic, x.state, x.next_attempt_at)
        IS DISTINCT FROM (EXCLUDED.group_id, EXCLUDED.temporality, EXCLUDED.original_topic, EXCLUDED.state, EXCLUDED.next_attempt_at);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION redrive_not_resent_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM failure_not_resent x USING old_rows o WHERE x.created_at = o.created_at AND x.id = o.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Statement-level: a mark of 500 failures runs each statement once, set-based. They fire for
-- statements on failure_states itself; a statement on one of its partitions (retention's
-- deletes from the default partition) keeps failure_not_resent itself.
CREATE TRIGGER failure_states_not_resent_insert AFTER INSERT ON failure_states
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_not_resent_insert();
CREATE TRIGGER failure_states_not_resent_update AFTER UPDATE ON failure_states
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_not_resent_update();
CREATE TRIGGER failure_states_not_resent_delete AFTER DELETE ON failure_states
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION redrive_not_resent_delete();

-- No index of the states holds the state.
DROP INDEX failure_states_state_created_idx;
DROP INDEX failure_states_due_idx;
DROP INDEX failure_states_group_state_idx;
-- The totals by group, temporality and topic (the counts of RESENT failures are these less
-- failure_not_resent's).
CREATE INDEX failure_states_group_counts_idx ON failure_states (group_id, temporality, original_topic);

-- Half of each page of the states free: the new version of a marked row fits on its page.
-- +goose StatementBegin
DO $$
DECLARE
    p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'failure_states'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 50)', p);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_create_partitions(lower timestamptz, upper timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    suffix text := redrive_partition_suffix(lower);
    taken  boolean;
BEGIN
    IF to_regclass('failure_records_' || suffix) IS NOT NULL THEN
        RETURN true;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM failure_states_default WHERE created_at >= $1 AND created_at < $2)'
        INTO taken USING lower, upper;
    IF taken THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF failure_records FOR VALUES FROM (%L) TO (%L) WITH (toast_tuple_target = 128)',
        'failure_records_' || suffix, lower, upper);
    EXECUTE format('CREATE TABLE %I PARTITION OF failure_states FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 50)',
        'failure_states_' || suffix, lower, upper);
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_create_partitions(lower timestamptz, upper timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    suffix text := redrive_partition_suffix(lower);
    taken  boolean;
BEGIN
    IF to_regclass('failure_records_' || suffix) IS NOT NULL THEN
        RETURN true;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM failure_states_default WHERE created_at >= $1 AND created_at < $2)'
        INTO taken USING lower, upper;
    IF taken THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF failure_records FOR VALUES FROM (%L) TO (%L) WITH (toast_tuple_target = 128)',
        'failure_records_' || suffix, lower, upper);
    EXECUTE format('CREATE TABLE %I PARTITION OF failure_states FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 90)',
        'failure_states_' || suffix, lower, upper);
    RETURN true;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
DECLARE
    p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'failure_states'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 90)', p);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP INDEX failure_states_group_counts_idx;
CREATE INDEX failure_states_state_created_idx ON failure_states (state, created_at, id);
CREATE INDEX failure_states_group_state_idx ON failure_states (group_id, state, temporality, original_topic);
CREATE INDEX failure_states_due_idx ON failure_states (next_attempt_at, id) WHERE state = 'RETRY_PENDING';
DROP TRIGGER failure_states_not_resent_delete ON failure_states;
DROP TRIGGER failure_states_not_resent_update ON failure_states;
DROP TRIGGER failure_states_not_resent_insert ON failure_states;
DROP FUNCTION redrive_not_resent_delete();
DROP FUNCTION redrive_not_resent_update();
DROP FUNCTION redrive_not_resent_insert();
DROP TABLE failure_not_resent;
