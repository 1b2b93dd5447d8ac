-- +goose Up

-- Foreign dead-letter sources (docs/intake.md): besides MessageProcessingFailedEvents, the
-- intake reads Spring Kafka, Kafka Connect, Kafka Streams and plain dead-letter topics. A
-- failure records the format of the source it came from and where its record was found on that
-- topic. A null original value (a tombstone) is stored as NULL, no longer as empty bytes.
ALTER TABLE failures ALTER COLUMN original_value DROP NOT NULL;
COMMENT ON COLUMN failures.original_value IS 'Value bytes of the failed record exactly; NULL for a null value (a tombstone).';
COMMENT ON COLUMN failures.original_partition IS 'Partition of the failed record; -1 when the source does not tell (raw, Connect without context headers).';
COMMENT ON COLUMN failures.original_offset IS 'Offset of the failed record; -1 when the source does not tell.';

ALTER TABLE failures
    ADD COLUMN source_format    text NOT NULL DEFAULT 'mpfe',
    ADD COLUMN source_topic     text,
    ADD COLUMN source_partition integer,
    ADD COLUMN source_offset    bigint,
    ADD CONSTRAINT failures_source_format_check
        CHECK (source_format IN ('mpfe', 'spring', 'connect', 'streams', 'raw')) NOT VALID,
    ADD CONSTRAINT failures_source_position_check
        CHECK ((source_topic IS NULL) = (source_partition IS NULL) AND (source_topic IS NULL) = (source_offset IS NULL)) NOT VALID;
ALTER TABLE failures VALIDATE CONSTRAINT failures_source_format_check;
ALTER TABLE failures VALIDATE CONSTRAINT failures_source_position_check;
COMMENT ON COLUMN failures.source_format IS 'Format of the topic the failure was read from: mpfe, spring, connect, streams or raw.';
COMMENT ON COLUMN failures.source_topic IS 'Topic the intake read the failure from (error topic or dead-letter topic); NULL for rows stored before migration 007.';
COMMENT ON COLUMN failures.source_partition IS 'Partition of the record the failure was read from.';
COMMENT ON COLUMN failures.source_offset IS 'Offset of the record the failure was read from.';

-- The list filters by source format or by source topic, newest first (store.Filter).
CREATE INDEX failures_source_format_created_idx ON failures (source_format, created_at, id);
CREATE INDEX failures_source_topic_created_idx ON failures (source_topic, created_at, id);

-- Reactivation of the service's own dead-letter topic: each run, and per partition the offset
-- up to which runs have read, so that the next run resumes there.
CREATE TABLE dlt_reactivations (
    id            bigint GENERATED ALWAYS AS IDENTITY,
    topic         text        NOT NULL,
    principal     text        NOT NULL,
    reason        text,
    record_limit  bigint,
    up_to_now     boolean     NOT NULL,
    state         text        NOT NULL,
    read_count    bigint      NOT NULL DEFAULT 0,
    reingested    bigint      NOT NULL DEFAULT 0,
    duplicates    bigint      NOT NULL DEFAULT 0,
    still_failing bigint      NOT NULL DEFAULT 0,
    error         text,
    started_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    CONSTRAINT dlt_reactivations_pkey PRIMARY KEY (id),
    CONSTRAINT dlt_reactivations_state_check CHECK (state IN ('RUNNING', 'DONE', 'FAILED', 'INTERRUPTED')),
    CONSTRAINT dlt_reactivations_limit_check CHECK (up_to_now OR record_limit > 0)
);
COMMENT ON TABLE dlt_reactivations IS 'Runs that fed records of the own dead-letter topic back through the intake.';
COMMENT ON COLUMN dlt_reactivations.record_limit IS 'Most records the run reads; NULL for a run up to the end of the topic when it started.';
COMMENT ON COLUMN dlt_reactivations.still_failing IS 'Records that still could not be stored; they stay on the dead-letter topic.';
CREATE UNIQUE INDEX dlt_reactivations_running_key ON dlt_reactivations (topic) WHERE state = 'RUNNING';

CREATE TABLE dlt_reactivation_positions (
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    next_offset bigint      NOT NULL,
    updated_at  timestamptz NOT NULL,
    CONSTRAINT dlt_reactivation_positions_pkey PRIMARY KEY (topic, partition),
    CONSTRAINT dlt_reactivation_positions_offset_check CHECK (next_offset >= 0)
);
COMMENT ON TABLE dlt_reactivation_positions IS 'Per partition of the own dead-letter topic, the offset where the next reactivation starts.';

-- +goose Down
DROP TABLE dlt_reactivation_positions;
DROP TABLE dlt_reactivations;
DROP INDEX failures_source_topic_created_idx;
DROP INDEX failures_source_format_created_idx;
ALTER TABLE failures DROP COLUMN source_offset, DROP COLUMN source_partition, DROP COLUMN source_topic, DROP COLUMN source_format;
UPDATE failures SET original_value = '\x'::bytea WHERE original_value IS NULL;
ALTER TABLE failures ALTER COLUMN original_value SET NOT NULL;
COMMENT ON COLUMN failures.original_value IS 'Value bytes of the failed record exactly.';
