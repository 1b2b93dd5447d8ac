-- +goose Up

-- The store's shape (docs/operations.md, "Storage layout"). Until now one wide row in failures
-- held both the record a consumer could not process (written once) and its state (changed by
-- every resend, close and retry), and every change of state wrote a new version of the whole
-- row into every one of its 18 indexes. The record and the state now live apart:
--
--   failure_records  the record, written once by the intake and never updated; partitioned by
--                    created_at (one partition per period, created ahead by housekeeping);
--   failure_states   the narrow state of each failure: the only rows a change of state writes,
--                    with five indexes; partitioned like the records (it repeats the record's
--                    temporality and topic, which never change, for the counts);
--   failure_keys     the idempotence key of every stored failure (unique across partitions);
--   failure_texts    stack traces stored once per SHA-256 and referenced from the records;
--   failures         a view that joins them into the former shape, for reading and for
--                    maintenance by hand (its INSTEAD OF triggers write the tables).
--
-- Retention drops whole partitions; a failure that is still open (or not yet expired) when
-- its partition ages out is moved, unchanged, into the default partition first.
--
-- The migration rewrites every failure once, in one transaction; writers of failures wait for
-- all of it, readers only for the final swap of the table for the view: stop redrive while it
-- runs (docs/operations.md, "Upgrading to the partitioned layout", gives its time per million
-- failures).

-- Writers wait until the migration commits (readers go on): a failure stored meanwhile would
-- not be moved.
LOCK TABLE failures IN EXCLUSIVE MODE;

-- +goose StatementBegin
-- redrive_partition_suffix names the partitions of the period that starts at lower.
CREATE FUNCTION redrive_partition_suffix(lower timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'p' || to_char(lower AT TIME ZONE 'UTC', 'YYYYMMDD')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- redrive_create_partitions creates the partitions of failure_records and failure_states for
-- [lower, upper), unless they exist. It returns false, and creates nothing, when rows in that
-- range sit in a default partition already (a partition cannot be created over them).
CREATE FUNCTION redrive_create_partitions(lower timestamptz, upper timestamptz) RETURNS boolean
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
COMMENT ON FUNCTION redrive_create_partitions(timestamptz, timestamptz) IS 'Creates the failure_records and failure_states partitions of one period; false when rows of the period sit in the default partitions.';

-- Large texts that repeat (stack traces, within a group nearly always the same), once each.
CREATE TABLE failure_texts (
    hash      bytea       NOT NULL,
    body      text        NOT NULL,
    last_used timestamptz NOT NULL,
    CONSTRAINT failure_texts_pkey PRIMARY KEY (hash),
    CONSTRAINT failure_texts_hash_check CHECK (octet_length(hash) = 32)
);
COMMENT ON TABLE failure_texts IS 'Stack traces stored once per SHA-256 of their UTF-8 bytes; failure_records.stack_trace_ref references them.';
COMMENT ON COLUMN failure_texts.last_used IS 'The newest failure referencing the text was stored at or after this time minus a day: housekeeping deletes the texts no stored failure can reference.';
ALTER TABLE failure_texts ALTER COLUMN body SET COMPRESSION lz4;

-- The idempotence key of every stored failure: unique whatever partition the failure is in.
CREATE TABLE failure_keys (
    idempotence_id text        NOT NULL,
    failure_id     uuid        NOT NULL,
    created_at     timestamptz NOT NULL,
    CONSTRAINT failure_keys_pkey PRIMARY KEY (idempotence_id)
);
COMMENT ON TABLE failure_keys IS 'The idempotence id of each stored failure (failure_records.idempotence_id), unique across partitions: the intake writes a failure once.';
COMMENT ON COLUMN failure_keys.created_at IS 'The failure''s created_at: where its record and state are.';

-- The record: everything the intake wrote, never updated.
CREATE TABLE failure_records (
    id                     uuid        NOT NULL,
    created_at             timestamptz NOT NULL,
    temporality            text        NOT NULL,
    error_code             text        NOT NULL,
    error_message          text        NOT NULL,
    error_description      text,
    stack_trace_ref        bytea,
    stack_trace_hash       text,
    event_id               text        NOT NULL,
    idempotence_id         text        NOT NULL,
    event_created          timestamptz NOT NULL,
    publisher_system       text        NOT NULL,
    publisher_service      text        NOT NULL,
    process_id             text,
    original_topic         text        NOT NULL,
    original_partition     integer     NOT NULL,
    original_offset        bigint      NOT NULL,
    original_key           bytea,
    original_value         bytea,
    header_names           text[]      NOT NULL,
    header_values          bytea[]     NOT NULL,
    message_id             text,
    message_idempotence_id text,
    message_created        timestamptz,
    message_system         text,
    message_service        text,
    message_type           text,
    message_type_version   text,
    causing_message        text        NOT NULL,
    attempt                integer     NOT NULL,
    source_format          text        NOT NULL,
    source_topic           text,
    source_partition       integer,
    source_offset          bigint,
    CONSTRAINT failure_records_pkey PRIMARY KEY (id, created_at),
    CONSTRAINT failure_records_temporality_check CHECK (temporality IN ('TEMPORARY', 'PERMANENT', 'UNKNOWN')),
    CONSTRAINT failure_records_headers_check CHECK (cardinality(header_names) = cardinality(header_values)),
    CONSTRAINT failure_records_attempt_check CHECK (attempt >= 1),
    CONSTRAINT failure_records_source_format_check CHECK (source_format IN ('mpfe', 'spring', 'connect', 'streams', 'raw')),
    CONSTRAINT failure_records_source_position_check
        CHECK ((source_topic IS NULL) = (source_partition IS NULL) AND (source_topic IS NULL) = (source_offset IS NULL))
) PARTITION BY RANGE (created_at);
COMMENT ON TABLE failure_records IS 'One failed record per MessageProcessingFailedEvent (or foreign dead-letter record), written once by the intake and never updated.';
COMMENT ON COLUMN failure_records.created_at IS 'When the failure was stored; the partition key.';
COMMENT ON COLUMN failure_records.stack_trace_ref IS 'SHA-256 of the stack trace in failure_texts; NULL when the event had none.';
COMMENT ON COLUMN failure_records.original_key IS 'Key bytes of the failed record exactly; NULL for a null key.';
COMMENT ON COLUMN failure_records.original_value IS 'Value bytes of the failed record exactly; NULL for a null value (a tombstone).';
COMMENT ON COLUMN failure_records.header_names IS 'Header names of the failed record, in order, duplicates kept.';
COMMENT ON COLUMN failure_records.header_values IS 'Header values, parallel to header_names; a NULL element is a null value.';
COMMENT ON COLUMN failure_records.causing_message IS 'Identity of the causing message: metadata eventId, else the redrive-origin header, else topic/partition/offset.';
COMMENT ON COLUMN failure_records.attempt IS 'Failure number of the causing message: 1 for its first failure, 2 after one resend failed again, ...';
COMMENT ON COLUMN failure_records.original_partition IS 'Partition of the failed record; -1 when the source does not tell.';
COMMENT ON COLUMN failure_records.original_offset IS 'Offset of the failed record; -1 when the source does not tell.';
ALTER TABLE failure_records ALTER COLUMN original_value SET COMPRESSION lz4;
ALTER TABLE failure_records ALTER COLUMN error_message SET COMPRESSION lz4;
ALTER TABLE failure_records ALTER COLUMN error_description SET COMPRESSION lz4;

-- The state: what changes, narrow.
CREATE TABLE failure_states (
    id                uuid        NOT NULL,
    created_at        timestamptz NOT NULL,
    group_id          bigint      NOT NULL,
    temporality       text        NOT NULL,
    original_topic    text        NOT NULL,
    state             text        NOT NULL,
    state_reason      text,
    next_attempt_at   timestamptz,
    resend_failures   integer     NOT NULL DEFAULT 0,
    last_resend_error text,
    resent_at         timestamptz,
    closed_reason     text,
    closed_by         text,
    closed_at         timestamptz,
    updated_at        timestamptz NOT NULL,
    CONSTRAINT failure_states_pkey PRIMARY KEY (id, created_at),
    CONSTRAINT failure_states_state_check CHECK (state IN ('RETRY_PENDING', 'PERMANENT', 'RESENT', 'CLOSED')),
    CONSTRAINT failure_states_pending_has_next_check CHECK (state <> 'RETRY_PENDING' OR next_attempt_at IS NOT NULL),
    CONSTRAINT failure_states_closed_has_reason_check CHECK (state <> 'CLOSED' OR closed_reason IS NOT NULL),
    CONSTRAINT failure_states_group_fkey FOREIGN KEY (group_id) REFERENCES failure_groups (id)
) PARTITION BY RANGE (created_at);
COMMENT ON TABLE failure_states IS 'The state of each failure (docs/states.md): the only rows that a resend, close or retry changes.';
COMMENT ON COLUMN failure_states.state IS 'RETRY_PENDING, PERMANENT, RESENT or CLOSED (docs/states.md).';
COMMENT ON COLUMN failure_states.created_at IS 'The failure''s created_at (failure_records.created_at): the partition key.';
COMMENT ON COLUMN failure_states.next_attempt_at IS 'When the scheduler resends a RETRY_PENDING failure.';
COMMENT ON COLUMN failure_states.resend_failures IS 'Resends of this failure that the broker did not acknowledge.';
COMMENT ON COLUMN failure_states.temporality IS 'The record''s temporality (never changes): counted by state without reading the records.';
COMMENT ON COLUMN failure_states.original_topic IS 'The record''s original topic (never changes): counted by state without reading the records.';

-- Rows outside every period (an old row at the upgrade, a failure carried forward from a
-- dropped partition, a clock far off) land in the default partitions.
CREATE TABLE failure_records_default PARTITION OF failure_records DEFAULT WITH (toast_tuple_target = 128);
CREATE TABLE failure_states_default PARTITION OF failure_states DEFAULT WITH (fillfactor = 90);

-- Weekly partitions (Thursday 00:00 UTC, aligned on the Unix epoch) from the oldest stored
-- failure, at most 26 weeks back, to four weeks ahead; older failures go to the default
-- partitions, and housekeeping keeps creating partitions ahead.
-- +goose StatementBegin
DO $$
DECLARE
    width  constant bigint := 7 * 86400;
    now_s  bigint := floor(extract(epoch FROM now()))::bigint;
    oldest bigint;
    lo     bigint;
BEGIN
    SELECT floor(extract(epoch FROM min(created_at)))::bigint INTO oldest FROM failures;
    lo := (greatest(coalesce(oldest, now_s), now_s - 26 * width) / width) * width;
    WHILE lo <= now_s + 4 * width LOOP
        PERFORM redrive_create_partitions(to_timestamp(lo), to_timestamp(lo + width));
        lo := lo + width;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- Move the failures: texts first, then records, states and keys; the indexes are built after,
-- while failures is still readable.
INSERT INTO failure_texts (hash, body, last_used)
SELECT sha256(convert_to(stack_trace, 'UTF8')), min(stack_trace), max(created_at)
FROM failures WHERE stack_trace IS NOT NULL
GROUP BY sha256(convert_to(stack_trace, 'UTF8'));

INSERT INTO failure_records (id, created_at, temporality, error_code, error_message, error_description,
    stack_trace_ref, stack_trace_hash, event_id, idempotence_id, event_created, publisher_system,
    publisher_service, process_id, original_topic, original_partition, original_offset, original_key,
    original_value, header_names, header_values, message_id, message_idempotence_id, message_created,
    message_system, message_service, message_type, message_type_version, causing_message, attempt,
    source_format, source_topic, source_partition, source_offset)
SELECT id, created_at, temporality, error_code, error_message, error_description,
    sha256(convert_to(stack_trace, 'UTF8')), stack_trace_hash, event_id, idempotence_id, event_created,
    publisher_system, publisher_service, process_id, original_topic, original_partition, original_offset,
    original_key, original_value, header_names, header_values, message_id, message_idempotence_id,
    message_created, message_system, message_service, message_type, message_type_version,
    causing_message, attempt, source_format, source_topic, source_partition, source_offset
FROM failures;

INSERT INTO failure_states (id, created_at, group_id, temporality, original_topic, state, state_reason,
    next_attempt_at, resend_failures, last_resend_error, resent_at, closed_reason, closed_by, closed_at, updated_at)
SELECT id, created_at, group_id, temporality, original_topic, state, state_reason, next_attempt_at, resend_failures,
    last_resend_error, resent_at, closed_reason, closed_by, closed_at, updated_at
FROM failures;

INSERT INTO failure_keys (idempotence_id, failure_id, created_at)
SELECT idempotence_id, id, created_at FROM failures;

-- The indexes of the record: written once, with the record.
CREATE INDEX failure_records_created_idx ON failure_records (created_at, id);
CREATE INDEX failure_records_topic_created_idx ON failure_records (original_topic, created_at, id);
CREATE INDEX failure_records_source_format_created_idx ON failure_records (source_format, created_at, id);
CREATE INDEX failure_records_source_topic_created_idx ON failure_records (source_topic, created_at, id);
CREATE INDEX failure_records_causing_idx ON failure_records (causing_message, attempt);
CREATE INDEX failure_records_key_prefix_idx ON failure_records (substring(original_key from 1 for 256));
CREATE INDEX failure_records_event_id_idx ON failure_records (event_id);
CREATE INDEX failure_records_stack_trace_hash_idx ON failure_records (stack_trace_hash) WHERE stack_trace_hash IS NOT NULL;
CREATE INDEX failure_records_header_names_idx ON failure_records USING gin (header_names);
CREATE INDEX failure_records_trace_id_idx ON failure_records (redrive_trace_id(header_names, header_values))
    WHERE redrive_trace_id(header_names, header_values) IS NOT NULL;
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX failure_records_error_message_trgm_idx ON failure_records USING gin (error_message gin_trgm_ops)';
    END IF;
END
$$;
-- +goose StatementEnd

-- The indexes of the state: all that a change of state writes.
CREATE INDEX failure_states_state_created_idx ON failure_states (state, created_at, id);
CREATE INDEX failure_states_group_created_idx ON failure_states (group_id, created_at, id);
-- A group's counts by state, and the counts by state, temporality, topic and (through the group)
-- publisher service, from this index alone.
CREATE INDEX failure_states_group_state_idx ON failure_states (group_id, state, temporality, original_topic);
CREATE INDEX failure_states_due_idx ON failure_states (next_attempt_at, id) WHERE state = 'RETRY_PENDING';

-- Readers of failures wait from here to the commit only: the indexes are built above.
-- Revisions keep their failure's id; the failure may now be in any partition, so the foreign
-- key goes (retention deletes the revisions of the failures it drops).
ALTER TABLE failure_revisions DROP CONSTRAINT failure_revisions_failure_fkey;

DROP TABLE failures;

-- failures: the former shape, for reading (the store's lists and searches, ad-hoc SQL) and for
-- maintenance by hand. Postgres inlines the view: a query on it joins the tables it needs
-- (the text is joined only when stack_trace is read). The state is joined on its id and a
-- created_at range of one instant, not created_at = created_at: the planner multiplies the
-- selectivities of two equalities as if id and created_at were independent and expects about
-- one row from the whole join, which makes it read every row of both tables for a page of 50;
-- a range it estimates as a third. Both forms find the same row, and both let each lookup of a
-- state skip the partitions of other periods.
CREATE VIEW failures AS
SELECT r.id, s.state, r.temporality, r.error_code, r.error_message, r.error_description,
    t.body AS stack_trace, r.stack_trace_hash, r.event_id, r.idempotence_id, r.event_created,
    r.publisher_system, r.publisher_service, r.process_id, r.original_topic, r.original_partition,
    r.original_offset, r.original_key, r.original_value, r.header_names, r.header_values,
    r.message_id, r.message_idempotence_id, r.message_created, r.message_system, r.message_service,
    r.message_type, r.message_type_version, r.causing_message, r.attempt, s.next_attempt_at,
    s.resend_failures, s.last_resend_error, s.resent_at, s.closed_reason, s.closed_by, s.closed_at,
    s.group_id, r.created_at, s.updated_at, s.state_reason, r.source_format, r.source_topic,
    r.source_partition, r.source_offset
FROM failure_records r
JOIN failure_states s ON s.id = r.id AND s.created_at >= r.created_at AND s.created_at <= r.created_at
LEFT JOIN failure_texts t ON t.hash = r.stack_trace_ref;
COMMENT ON VIEW failures IS 'Each failure''s record joined with its state (and stack trace), as one row; writable through triggers for maintenance by hand.';
ALTER VIEW failures ALTER COLUMN id SET DEFAULT gen_random_uuid();
ALTER VIEW failures ALTER COLUMN header_names SET DEFAULT '{}';
ALTER VIEW failures ALTER COLUMN header_values SET DEFAULT '{}';
ALTER VIEW failures ALTER COLUMN attempt SET DEFAULT 1;
ALTER VIEW failures ALTER COLUMN resend_failures SET DEFAULT 0;
ALTER VIEW failures ALTER COLUMN created_at SET DEFAULT now();
ALTER VIEW failures ALTER COLUMN updated_at SET DEFAULT now();
ALTER VIEW failures ALTER COLUMN source_format SET DEFAULT 'mpfe';

-- +goose StatementBegin
CREATE FUNCTION redrive_failures_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ref bytea;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM failure_states WHERE id = OLD.id AND created_at = OLD.created_at;
        DELETE FROM failure_records WHERE id = OLD.id AND created_at = OLD.created_at;
        DELETE FROM failure_keys WHERE failure_id = OLD.id AND idempotence_id = OLD.idempotence_id;
        DELETE FROM failure_revisions WHERE failure_id = OLD.id;
        RETURN OLD;
    END IF;
    IF NEW.stack_trace IS NOT NULL THEN
        ref := sha256(convert_to(NEW.stack_trace, 'UTF8'));
        INSERT INTO failure_texts (hash, body, last_used) VALUES (ref, NEW.stack_trace, NEW.created_at)
        ON CONFLICT (hash) DO UPDATE SET last_used = EXCLUDED.last_used
            WHERE failure_texts.last_used < EXCLUDED.last_used - interval '1 day';
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO failure_keys (idempotence_id, failure_id, created_at) VALUES (NEW.idempotence_id, NEW.id, NEW.created_at);
        INSERT INTO failure_records (id, created_at, temporality, error_code, error_message, error_description,
            stack_trace_ref, stack_trace_hash, event_id, idempotence_id, event_created, publisher_system,
            publisher_service, process_id, original_topic, original_partition, original_offset, original_key,
            original_value, header_names, header_values, message_id, message_idempotence_id, message_created,
            message_system, message_service, message_type, message_type_version, causing_message, attempt,
            source_format, source_topic, source_partition, source_offset)
        VALUES (NEW.id, NEW.created_at, NEW.temporality, NEW.error_code, NEW.error_message, NEW.error_description,
            ref, NEW.stack_trace_hash, NEW.event_id, NEW.idempotence_id, NEW.event_created, NEW.publisher_system,
            NEW.publisher_service, NEW.process_id, NEW.original_topic, NEW.original_partition, NEW.original_offset,
            NEW.original_key, NEW.original_value, NEW.header_names, NEW.header_values, NEW.message_id,
            NEW.message_idempotence_id, NEW.message_created, NEW.message_system, NEW.message_service,
            NEW.message_type, NEW.message_type_version, NEW.causing_message, NEW.attempt,
            NEW.source_format, NEW.source_topic, NEW.source_partition, NEW.source_offset);
        INSERT INTO failure_states (id, created_at, group_id, temporality, original_topic, state, state_reason,
            next_attempt_at, resend_failures, last_resend_error, resent_at, closed_reason, closed_by, closed_at, updated_at)
        VALUES (NEW.id, NEW.created_at, NEW.group_id, NEW.temporality, NEW.original_topic, NEW.state, NEW.state_reason, NEW.next_attempt_at,
            NEW.resend_failures, NEW.last_resend_error, NEW.resent_at, NEW.closed_reason, NEW.closed_by,
            NEW.closed_at, NEW.updated_at);
        RETURN NEW;
    END IF;
    -- UPDATE: the state as asked; the record only when a maintenance by hand changes it (a
    -- new created_at moves the failure to the partition of that time).
    IF NEW.id IS DISTINCT FROM OLD.id OR NEW.created_at IS DISTINCT FROM OLD.created_at
        OR NEW.idempotence_id IS DISTINCT FROM OLD.idempotence_id THEN
        UPDATE failure_keys SET idempotence_id = NEW.idempotence_id, failure_id = NEW.id, created_at = NEW.created_at
        WHERE idempotence_id = OLD.idempotence_id;
        UPDATE failure_records SET id = NEW.id, created_at = NEW.created_at, idempotence_id = NEW.idempotence_id
        WHERE id = OLD.id AND created_at = OLD.created_at;
        UPDATE failure_states SET id = NEW.id, created_at = NEW.created_at
        WHERE id = OLD.id AND created_at = OLD.created_at;
        UPDATE failure_revisions SET failure_id = NEW.id WHERE failure_id = OLD.id AND NEW.id <> OLD.id;
    END IF;
    UPDATE failure_states SET group_id = NEW.group_id, temporality = NEW.temporality, original_topic = NEW.original_topic,
        state = NEW.state, state_reason = NEW.state_reason,
        next_attempt_at = NEW.next_attempt_at, resend_failures = NEW.resend_failures,
        last_resend_error = NEW.last_resend_error, resent_at = NEW.resent_at, closed_reason = NEW.closed_reason,
        closed_by = NEW.closed_by, closed_at = NEW.closed_at, updated_at = NEW.updated_at
    WHERE id = NEW.id AND created_at = NEW.created_at;
    IF ROW(NEW.temporality, NEW.error_code, NEW.error_message, NEW.error_description, NEW.stack_trace,
            NEW.stack_trace_hash, NEW.event_id, NEW.event_created, NEW.publisher_system, NEW.publisher_service,
            NEW.process_id, NEW.original_topic, NEW.original_partition, NEW.original_offset, NEW.original_key,
            NEW.original_value, NEW.header_names, NEW.header_values, NEW.message_id, NEW.message_idempotence_id,
            NEW.message_created, NEW.message_system, NEW.message_service, NEW.message_type,
            NEW.message_type_version, NEW.causing_message, NEW.attempt, NEW.source_format, NEW.source_topic,
            NEW.source_partition, NEW.source_offset)
        IS DISTINCT FROM ROW(OLD.temporality, OLD.error_code, OLD.error_message, OLD.error_description, OLD.stack_trace,
            OLD.stack_trace_hash, OLD.event_id, OLD.event_created, OLD.publisher_system, OLD.publisher_service,
            OLD.process_id, OLD.original_topic, OLD.original_partition, OLD.original_offset, OLD.original_key,
            OLD.original_value, OLD.header_names, OLD.header_values, OLD.message_id, OLD.message_idempotence_id,
            OLD.message_created, OLD.message_system, OLD.message_service, OLD.message_type,
            OLD.message_type_version, OLD.causing_message, OLD.attempt, OLD.source_format, OLD.source_topic,
            OLD.source_partition, OLD.source_offset) THEN
        UPDATE failure_records SET temporality = NEW.temporality, error_code = NEW.error_code,
            error_message = NEW.error_message, error_description = NEW.error_description, stack_trace_ref = ref,
            stack_trace_hash = NEW.stack_trace_hash, event_id = NEW.event_id, event_created = NEW.event_created,
            publisher_system = NEW.publisher_system, publisher_service = NEW.publisher_service,
            process_id = NEW.process_id, original_topic = NEW.original_topic,
            original_partition = NEW.original_partition, original_offset = NEW.original_offset,
            original_key = NEW.original_key, original_value = NEW.original_value, header_names = NEW.header_names,
            header_values = NEW.header_values, message_id = NEW.message_id,
            message_idempotence_id = NEW.message_idempotence_id, message_created = NEW.message_created,
            message_system = NEW.message_system, message_service = NEW.message_service,
            message_type = NEW.message_type, message_type_version = NEW.message_type_version,
            causing_message = NEW.causing_message, attempt = NEW.attempt, source_format = NEW.source_format,
            source_topic = NEW.source_topic, source_partition = NEW.source_partition, source_offset = NEW.source_offset
        WHERE id = NEW.id AND created_at = NEW.created_at;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER failures_write INSTEAD OF INSERT OR UPDATE OR DELETE ON failures
    FOR EACH ROW EXECUTE FUNCTION redrive_failures_write();

-- +goose Down
DROP VIEW failures;
DROP FUNCTION redrive_failures_write();
CREATE TABLE failures (
    id                     uuid        NOT NULL DEFAULT gen_random_uuid(),
    state                  text        NOT NULL,
    temporality            text        NOT NULL,
    error_code             text        NOT NULL,
    error_message          text        NOT NULL,
    error_description      text,
    stack_trace            text,
    stack_trace_hash       text,
    event_id               text        NOT NULL,
    idempotence_id         text        NOT NULL,
    event_created          timestamptz NOT NULL,
    publisher_system       text        NOT NULL,
    publisher_service      text        NOT NULL,
    process_id             text,
    original_topic         text        NOT NULL,
    original_partition     integer     NOT NULL,
    original_offset        bigint      NOT NULL,
    original_key           bytea,
    original_value         bytea,
    header_names           text[]      NOT NULL DEFAULT '{}',
    header_values          bytea[]     NOT NULL DEFAULT '{}',
    message_id             text,
    message_idempotence_id text,
    message_created        timestamptz,
    message_system         text,
    message_service        text,
    message_type           text,
    message_type_version   text,
    causing_message        text        NOT NULL,
    attempt                integer     NOT NULL DEFAULT 1,
    next_attempt_at        timestamptz,
    resend_failures        integer     NOT NULL DEFAULT 0,
    last_resend_error      text,
    resent_at              timestamptz,
    closed_reason          text,
    closed_by              text,
    closed_at              timestamptz,
    group_id               bigint      NOT NULL,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    state_reason           text,
    source_format          text        NOT NULL DEFAULT 'mpfe',
    source_topic           text,
    source_partition       integer,
    source_offset          bigint,
    CONSTRAINT failures_pkey PRIMARY KEY (id),
    CONSTRAINT failures_idempotence_id_key UNIQUE (idempotence_id),
    CONSTRAINT failures_state_check CHECK (state IN ('RETRY_PENDING', 'PERMANENT', 'RESENT', 'CLOSED')),
    CONSTRAINT failures_temporality_check CHECK (temporality IN ('TEMPORARY', 'PERMANENT', 'UNKNOWN')),
    CONSTRAINT failures_headers_check CHECK (cardinality(header_names) = cardinality(header_values)),
    CONSTRAINT failures_attempt_check CHECK (attempt >= 1),
    CONSTRAINT failures_pending_has_next_check CHECK (state <> 'RETRY_PENDING' OR next_attempt_at IS NOT NULL),
    CONSTRAINT failures_closed_has_reason_check CHECK (state <> 'CLOSED' OR closed_reason IS NOT NULL),
    CONSTRAINT failures_group_fkey FOREIGN KEY (group_id) REFERENCES failure_groups (id),
    CONSTRAINT failures_source_format_check CHECK (source_format IN ('mpfe', 'spring', 'connect', 'streams', 'raw')),
    CONSTRAINT failures_source_position_check
        CHECK ((source_topic IS NULL) = (source_partition IS NULL) AND (source_topic IS NULL) = (source_offset IS NULL))
);
INSERT INTO failures (id, state, temporality, error_code, error_message, error_description, stack_trace,
    stack_trace_hash, event_id, idempotence_id, event_created, publisher_system, publisher_service, process_id,
    original_topic, original_partition, original_offset, original_key, original_value, header_names,
    header_values, message_id, message_idempotence_id, message_created, message_system, message_service,
    message_type, message_type_version, causing_message, attempt, next_attempt_at, resend_failures,
    last_resend_error, resent_at, closed_reason, closed_by, closed_at, group_id, created_at, updated_at,
    state_reason, source_format, source_topic, source_partition, source_offset)
SELECT r.id, s.state, r.temporality, r.error_code, r.error_message, r.error_description, t.body,
    r.stack_trace_hash, r.event_id, r.idempotence_id, r.event_created, r.publisher_system, r.publisher_service,
    r.process_id, r.original_topic, r.original_partition, r.original_offset, r.original_key, r.original_value,
    r.header_names, r.header_values, r.message_id, r.message_idempotence_id, r.message_created,
    r.message_system, r.message_service, r.message_type, r.message_type_version, r.causing_message, r.attempt,
    s.next_attempt_at, s.resend_failures, s.last_resend_error, s.resent_at, s.closed_reason, s.closed_by,
    s.closed_at, s.group_id, r.created_at, s.updated_at, s.state_reason, r.source_format, r.source_topic,
    r.source_partition, r.source_offset
FROM failure_records r
JOIN failure_states s ON s.id = r.id AND s.created_at = r.created_at
LEFT JOIN failure_texts t ON t.hash = r.stack_trace_ref;
DROP TABLE failure_states;
DROP TABLE failure_records;
DROP TABLE failure_keys;
DROP TABLE failure_texts;
DROP FUNCTION redrive_create_partitions(timestamptz, timestamptz);
DROP FUNCTION redrive_partition_suffix(timestamptz);
DELETE FROM failure_revisions v WHERE NOT EXISTS (SELECT 1 FROM failures f WHERE f.id = v.failure_id);
ALTER TABLE failure_revisions ADD CONSTRAINT failure_revisions_failure_fkey
    FOREIGN KEY (failure_id) REFERENCES failures (id) ON DELETE CASCADE;
CREATE INDEX failures_created_idx ON failures (created_at, id);
CREATE INDEX failures_state_created_idx ON failures (state, created_at, id);
CREATE INDEX failures_topic_created_idx ON failures (original_topic, created_at, id);
CREATE INDEX failures_group_state_idx ON failures (group_id, state);
CREATE INDEX failures_causing_idx ON failures (causing_message, attempt);
CREATE INDEX failures_due_idx ON failures (next_attempt_at, id) WHERE state = 'RETRY_PENDING';
CREATE INDEX failures_group_created_idx ON failures (group_id, created_at, id);
CREATE INDEX failures_stats_idx ON failures (state, temporality, original_topic, publisher_service);
CREATE INDEX failures_source_format_created_idx ON failures (source_format, created_at, id);
CREATE INDEX failures_source_topic_created_idx ON failures (source_topic, created_at, id);
CREATE INDEX failures_key_prefix_idx ON failures (substring(original_key from 1 for 256));
CREATE INDEX failures_event_id_idx ON failures (event_id);
CREATE INDEX failures_stack_trace_hash_idx ON failures (stack_trace_hash) WHERE stack_trace_hash IS NOT NULL;
CREATE INDEX failures_header_names_idx ON failures USING gin (header_names);
CREATE INDEX failures_trace_id_idx ON failures (redrive_trace_id(header_names, header_values))
    WHERE redrive_trace_id(header_names, header_values) IS NOT NULL;
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX failures_error_message_trgm_idx ON failures USING gin (error_message gin_trgm_ops)';
    END IF;
END
$$;
-- +goose StatementEnd
-- The table again carries migration 015's failure.exhausted triggers (021 moved them to the states).
CREATE TRIGGER failures_notify_exhausted_insert AFTER INSERT ON failures
    FOR EACH ROW WHEN (NEW.state = 'PERMANENT' AND NEW.state_reason = 'retries exhausted')
    EXECUTE FUNCTION redrive_notify_event('failure.exhausted');
CREATE TRIGGER failures_notify_exhausted_update AFTER UPDATE OF state, state_reason ON failures
    FOR EACH ROW WHEN (NEW.state = 'PERMANENT' AND NEW.state_reason = 'retries exhausted'
                       AND (OLD.state <> 'PERMANENT' OR OLD.state_reason IS DISTINCT FROM 'retries exhausted'))
    EXECUTE FUNCTION redrive_notify_event('failure.exhausted');
