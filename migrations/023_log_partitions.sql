-- +goose Up

-- The audit log and the job items grow with the failures and age out with them
-- (docs/operations.md, "Audit and job item partitions"):
--
--   audit_log  partitioned by at, one partition per period of the failure tables (the same
--              bounds, the same suffix), created ahead by housekeeping; a job writes one entry
--              per batch (job_id names the job) and each of the batch's items names that entry
--              (job_items.audit_id), so a failure's audit history still shows every job that
--              acted on it;
--   job_items  partitioned by its job's created_at (all items of a job sit in one partition),
--              each item with its failure's created_at, so that a batch looks its failures up
--              in their own partitions.
--
-- Both tables are rewritten once, in this transaction: writers of either (operators, jobs,
-- resends) wait for all of it; readers only for the final swap. Ids, times and every column
-- are kept; a job's audit entries carried their id in details before, and now also in job_id.

LOCK TABLE audit_log, job_items IN EXCLUSIVE MODE;

-- +goose StatementBegin
-- redrive_create_log_partitions creates the partitions of audit_log and job_items for
-- [lower, upper), unless they exist. It returns false, and creates nothing, when rows of that
-- range sit in a default partition already.
CREATE FUNCTION redrive_create_log_partitions(lower timestamptz, upper timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    suffix text := redrive_partition_suffix(lower);
    taken  boolean;
BEGIN
    IF to_regclass('audit_log_' || suffix) IS NOT NULL THEN
        RETURN true;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM audit_log_default WHERE at >= $1 AND at < $2)
        OR EXISTS (SELECT 1 FROM job_items_default WHERE created_at >= $1 AND created_at < $2)'
        INTO taken USING lower, upper;
    IF taken THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF audit_log FOR VALUES FROM (%L) TO (%L)',
        'audit_log_' || suffix, lower, upper);
    EXECUTE format('CREATE TABLE %I PARTITION OF job_items FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 40)',
        'job_items_' || suffix, lower, upper);
    RETURN true;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION redrive_create_log_partitions(timestamptz, timestamptz) IS 'Creates the audit_log and job_items partitions of one period; false when rows of the period sit in their default partitions.';

ALTER TABLE audit_log RENAME TO audit_log_unpartitioned;
ALTER TABLE audit_log_unpartitioned RENAME CONSTRAINT audit_log_pkey TO audit_log_unpartitioned_pkey;
DROP INDEX audit_log_failure_idx, audit_log_group_idx, audit_log_job_idx;
ALTER TABLE job_items RENAME TO job_items_unpartitioned;
ALTER TABLE job_items_unpartitioned RENAME CONSTRAINT job_items_pkey TO job_items_unpartitioned_pkey;
ALTER TABLE job_items_unpartitioned RENAME CONSTRAINT job_items_job_fkey TO job_items_unpartitioned_job_fkey;
ALTER TABLE job_items_unpartitioned RENAME CONSTRAINT job_items_outcome_check TO job_items_unpartitioned_outcome_check;
DROP INDEX job_items_pending_idx;

CREATE TABLE audit_log (
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    failure_id  uuid,
    group_id    bigint,
    action      text        NOT NULL,
    principal   text        NOT NULL,
    reason      text,
    details     jsonb,
    at          timestamptz NOT NULL DEFAULT now(),
    job_id      uuid,
    CONSTRAINT audit_log_pkey PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
COMMENT ON TABLE audit_log IS 'Operator actions, one entry per action (a job: one per job action and per batch); kept when the failure itself is deleted by retention, dropped by period after the audit age.';
COMMENT ON COLUMN audit_log.at IS 'When the action happened; the partition key.';
COMMENT ON COLUMN audit_log.job_id IS 'The job whose action or batch this entry is (details->>''job_id'' too); NULL for other actions.';

CREATE TABLE job_items (
    job_id             uuid        NOT NULL,
    seq                bigint      NOT NULL,
    failure_id         uuid        NOT NULL,
    outcome            text,
    detail             text,
    done_at            timestamptz,
    created_at         timestamptz NOT NULL,
    failure_created_at timestamptz,
    audit_id           bigint,
    CONSTRAINT job_items_pkey PRIMARY KEY (job_id, seq, created_at),
    CONSTRAINT job_items_job_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
    CONSTRAINT job_items_outcome_check CHECK (outcome IN ('done', 'skipped', 'failed'))
) PARTITION BY RANGE (created_at);
COMMENT ON TABLE job_items IS 'The failures a job acts on, pinned at its preview, in order, with each outcome once known.';
COMMENT ON COLUMN job_items.outcome IS 'done (the action applied), skipped (not found, or its state changed since the preview), failed (attempted, did not succeed); NULL until acted on.';
COMMENT ON COLUMN job_items.created_at IS 'The job''s created_at (jobs.created_at): the partition key; every item of a job is in one partition.';
COMMENT ON COLUMN job_items.failure_created_at IS 'The failure''s created_at when the preview pinned it: where its record and state are; NULL when no failure had the id.';
COMMENT ON COLUMN job_items.audit_id IS 'The audit_log entry of the batch that acted on the item (audit_log.id, at = done_at); NULL for a skipped item or one recorded before this column.';

CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;
CREATE TABLE job_items_default PARTITION OF job_items DEFAULT WITH (fillfactor = 40);

-- The periods of the failure tables, for the log tables too.
-- +goose StatementBegin
DO $$
DECLARE
    b text[];
BEGIN
    FOR b IN
        SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\) TO \(''([^'']+)''\)')
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'failure_records'::regclass AND NOT c.relpartbound IS NULL
    LOOP
        IF b IS NOT NULL THEN
            PERFORM redrive_create_log_partitions(b[1]::timestamptz, b[2]::timestamptz);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

INSERT INTO audit_log (id, failure_id, group_id, action, principal, reason, details, at, job_id) OVERRIDING SYSTEM VALUE
SELECT id, failure_id, group_id, action, principal, reason, details, at,
    CASE WHEN details ? 'job_id' AND details->>'job_id' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
        THEN (details->>'job_id')::uuid END
FROM audit_log_unpartitioned;

INSERT INTO job_items (job_id, seq, failure_id, outcome, detail, done_at, created_at, failure_created_at)
SELECT i.job_id, i.seq, i.failure_id, i.outcome, i.detail, i.done_at, j.created_at, k.created_at
FROM job_items_unpartitioned i
JOIN jobs j ON j.id = i.job_id
LEFT JOIN LATERAL (SELECT s.created_at FROM failure_states s WHERE s.id = i.failure_id LIMIT 1) k ON true;

-- +goose StatementBegin
DO $$
DECLARE
    seq text := pg_get_serial_sequence('audit_log', 'id');
BEGIN
    PERFORM setval(seq, coalesce((SELECT max(id) FROM audit_log_unpartitioned), 0) + 1, false);
    DROP TABLE audit_log_unpartitioned;
    IF seq <> 'public.audit_log_id_seq' THEN
        EXECUTE format('ALTER SEQUENCE %s RENAME TO audit_log_id_seq', seq);
    END IF;
END
$$;
-- +goose StatementEnd
DROP TABLE job_items_unpartitioned;

CREATE INDEX audit_log_failure_idx ON audit_log (failure_id, at) WHERE failure_id IS NOT NULL;
CREATE INDEX audit_log_group_idx ON audit_log (group_id, at) WHERE group_id IS NOT NULL;
CREATE INDEX audit_log_job_idx ON audit_log (job_id, at, id) WHERE job_id IS NOT NULL;
-- No index covers the columns an outcome sets (outcome, detail, done_at, audit_id), and a
-- partition's pages keep room for a new version of each of their rows (fillfactor 40): the
-- outcome of an item is a HOT update, which writes no index entry. The pending items of a job
-- are found by the primary key from the job's cursor on.
CREATE INDEX job_items_failure_idx ON job_items (failure_id);

-- +goose Down
LOCK TABLE audit_log, job_items IN EXCLUSIVE MODE;
ALTER TABLE audit_log RENAME TO audit_log_partitioned;
ALTER TABLE audit_log_partitioned RENAME CONSTRAINT audit_log_pkey TO audit_log_partitioned_pkey;
DROP INDEX audit_log_failure_idx, audit_log_group_idx, audit_log_job_idx;
ALTER TABLE job_items RENAME TO job_items_partitioned;
ALTER TABLE job_items_partitioned RENAME CONSTRAINT job_items_pkey TO job_items_partitioned_pkey;
ALTER TABLE job_items_partitioned RENAME CONSTRAINT job_items_job_fkey TO job_items_partitioned_job_fkey;
ALTER TABLE job_items_partitioned RENAME CONSTRAINT job_items_outcome_check TO job_items_partitioned_outcome_check;
DROP INDEX job_items_failure_idx;

CREATE TABLE audit_log (
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    failure_id  uuid,
    group_id    bigint,
    action      text        NOT NULL,
    principal   text        NOT NULL,
    reason      text,
    details     jsonb,
    at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT audit_log_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE audit_log IS 'Operator actions; kept when the failure itself is deleted by retention.';
-- A batch's entry becomes one entry per item again, as before the batch entries.
INSERT INTO audit_log (id, failure_id, group_id, action, principal, reason, details, at) OVERRIDING SYSTEM VALUE
SELECT id, failure_id, group_id, action, principal, reason, details, at FROM audit_log_partitioned
WHERE NOT (failure_id IS NULL AND details ? 'batch');
INSERT INTO audit_log (failure_id, group_id, action, principal, reason, details, at)
SELECT i.failure_id, a.group_id, a.action, a.principal, a.reason,
    (a.details - 'batch') || coalesce(a.details->'batch'->'item'->i.outcome, '{}')
        || CASE WHEN i.outcome = 'failed' THEN jsonb_build_object('error', i.detail) ELSE '{}' END,
    a.at
FROM audit_log_partitioned a JOIN job_items_partitioned i ON i.job_id = a.job_id AND i.audit_id = a.id
WHERE a.failure_id IS NULL AND a.details ? 'batch'
ORDER BY a.at, a.id, i.seq;
-- +goose StatementBegin
DO $$
DECLARE
    seq text := pg_get_serial_sequence('audit_log', 'id');
BEGIN
    PERFORM setval(seq, greatest(coalesce((SELECT max(id) FROM audit_log_partitioned), 0),
        coalesce((SELECT max(id) FROM audit_log), 0)) + 1, false);
    DROP TABLE audit_log_partitioned;
    IF seq <> 'public.audit_log_id_seq' THEN
        EXECUTE format('ALTER SEQUENCE %s RENAME TO audit_log_id_seq', seq);
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX audit_log_failure_idx ON audit_log (failure_id, at);
CREATE INDEX audit_log_group_idx ON audit_log (group_id, at) WHERE group_id IS NOT NULL;
CREATE INDEX audit_log_job_idx ON audit_log ((details->>'job_id'), at) WHERE details ? 'job_id';

CREATE TABLE job_items (
    job_id     uuid        NOT NULL,
    seq        bigint      NOT NULL,
    failure_id uuid        NOT NULL,
    outcome    text,
    detail     text,
    done_at    timestamptz,
    CONSTRAINT job_items_pkey PRIMARY KEY (job_id, seq),
    CONSTRAINT job_items_job_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
    CONSTRAINT job_items_outcome_check CHECK (outcome IN ('done', 'skipped', 'failed'))
);
COMMENT ON TABLE job_items IS 'The failures a job acts on, pinned at its preview, in order, with each outcome once known.';
COMMENT ON COLUMN job_items.outcome IS 'done (the action applied), skipped (not found, or its state changed since the preview), failed (attempted, did not succeed); NULL until acted on.';
INSERT INTO job_items (job_id, seq, failure_id, outcome, detail, done_at)
SELECT job_id, seq, failure_id, outcome, detail, done_at FROM job_items_partitioned;
DROP TABLE job_items_partitioned;
CREATE INDEX job_items_pending_idx ON job_items (job_id, seq) WHERE outcome IS NULL;
DROP FUNCTION redrive_create_log_partitions(timestamptz, timestamptz);
