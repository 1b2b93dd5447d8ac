-- +goose Up

-- Several Kafka clusters: each failure records the cluster it was read from, and a resend goes
-- back to it. The record is written once, so the cluster is a column of failure_records; every
-- failure stored before is from the one cluster a deployment had then, named 'default'. Adding
-- a column with a constant default rewrites no partition.
ALTER TABLE failure_records ADD COLUMN cluster text NOT NULL DEFAULT 'default';
COMMENT ON COLUMN failure_records.cluster IS 'Name of the configured Kafka cluster the intake read the failure from; its resends go there. ''default'' for the cluster of the single-cluster flags, and for every failure stored before clusters were named.';
CREATE INDEX failure_records_cluster_created_idx ON failure_records (cluster, created_at, id);

-- The view failures (migration 020) is replaced: it gains the column at its end, and its
-- INSTEAD OF trigger function writes it (a row inserted by hand without it is from 'default').
CREATE OR REPLACE VIEW failures AS
SELECT r.id, s.state, r.temporality, r.error_code, r.error_message, r.error_description,
    t.body AS stack_trace, r.stack_trace_hash, r.event_id, r.idempotence_id, r.event_created,
    r.publisher_system, r.publisher_service, r.process_id, r.original_topic, r.original_partition,
    r.original_offset, r.original_key, r.original_value, r.header_names, r.header_values,
    r.message_id, r.message_idempotence_id, r.message_created, r.message_system, r.message_service,
    r.message_type, r.message_type_version, r.causing_message, r.attempt, s.next_attempt_at,
    s.resend_failures, s.last_resend_error, s.resent_at, s.closed_reason, s.closed_by, s.closed_at,
    s.group_id, r.created_at, s.updated_at, s.state_reason, r.source_format, r.source_topic,
    r.source_partition, r.source_offset, r.cluster
FROM failure_records r
JOIN failure_states s ON s.id = r.id AND s.created_at >= r.created_at AND s.created_at <= r.created_at
LEFT JOIN failure_texts t ON t.hash = r.stack_trace_ref;
ALTER VIEW failures ALTER COLUMN cluster SET DEFAULT 'default';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_failures_write() RETURNS trigger
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
            source_format, source_topic, source_partition, source_offset, cluster)
        VALUES (NEW.id, NEW.created_at, NEW.temporality, NEW.error_code, NEW.error_message, NEW.error_description,
            ref, NEW.stack_trace_hash, NEW.event_id, NEW.idempotence_id, NEW.event_created, NEW.publisher_system,
            NEW.publisher_service, NEW.process_id, NEW.original_topic, NEW.original_partition, NEW.original_offset,
            NEW.original_key, NEW.original_value, NEW.header_names, NEW.header_values, NEW.message_id,
            NEW.message_idempotence_id, NEW.message_created, NEW.message_system, NEW.message_service,
            NEW.message_type, NEW.message_type_version, NEW.causing_message, NEW.attempt,
            NEW.source_format, NEW.source_topic, NEW.source_partition, NEW.source_offset, coalesce(NEW.cluster, 'default'));
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
            NEW.source_partition, NEW.source_offset, NEW.cluster)
        IS DISTINCT FROM ROW(OLD.temporality, OLD.error_code, OLD.error_message, OLD.error_description, OLD.stack_trace,
            OLD.stack_trace_hash, OLD.event_id, OLD.event_created, OLD.publisher_system, OLD.publisher_service,
            OLD.process_id, OLD.original_topic, OLD.original_partition, OLD.original_offset, OLD.original_key,
            OLD.original_value, OLD.header_names, OLD.header_values, OLD.message_id, OLD.message_idempotence_id,
            OLD.message_created, OLD.message_system, OLD.message_service, OLD.message_type,
            OLD.message_type_version, OLD.causing_message, OLD.attempt, OLD.source_format, OLD.source_topic,
            OLD.source_partition, OLD.source_offset, OLD.cluster) THEN
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
            source_topic = NEW.source_topic, source_partition = NEW.source_partition, source_offset = NEW.source_offset,
            cluster = NEW.cluster
        WHERE id = NEW.id AND created_at = NEW.created_at;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- A reactivation reads the own dead-letter topic of one cluster: runs and positions are per
-- cluster and topic.
ALTER TABLE dlt_reactivations ADD COLUMN cluster text NOT NULL DEFAULT 'default';
COMMENT ON COLUMN dlt_reactivations.cluster IS 'The Kafka cluster whose dead-letter topic the run reads.';
DROP INDEX dlt_reactivations_running_key;
CREATE UNIQUE INDEX dlt_reactivations_running_key ON dlt_reactivations (cluster, topic) WHERE state = 'RUNNING';
ALTER TABLE dlt_reactivation_positions ADD COLUMN cluster text NOT NULL DEFAULT 'default';
ALTER TABLE dlt_reactivation_positions DROP CONSTRAINT dlt_reactivation_positions_pkey;
ALTER TABLE dlt_reactivation_positions ADD CONSTRAINT dlt_reactivation_positions_pkey PRIMARY KEY (cluster, topic, partition);

-- A resend_to job may send to another cluster than each failure's own (along an allowed route).
ALTER TABLE jobs ADD COLUMN target_cluster text;
COMMENT ON COLUMN jobs.target_cluster IS 'The Kafka cluster a resend_to job sends to; NULL: each failure''s own.';

-- +goose Down
ALTER TABLE jobs DROP COLUMN target_cluster;
ALTER TABLE dlt_reactivation_positions DROP CONSTRAINT dlt_reactivation_positions_pkey;
DELETE FROM dlt_reactivation_positions WHERE cluster <> 'default';
ALTER TABLE dlt_reactivation_positions ADD CONSTRAINT dlt_reactivation_positions_pkey PRIMARY KEY (topic, partition);
ALTER TABLE dlt_reactivation_positions DROP COLUMN cluster;
DROP INDEX dlt_reactivations_running_key;
UPDATE dlt_reactivations SET state = 'INTERRUPTED', finished_at = coalesce(finished_at, now())
WHERE state = 'RUNNING' AND cluster <> 'default';
CREATE UNIQUE INDEX dlt_reactivations_running_key ON dlt_reactivations (topic) WHERE state = 'RUNNING';
ALTER TABLE dlt_reactivations DROP COLUMN cluster;

-- The view and its trigger function as migration 020 made them.
DROP VIEW failures;
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
CREATE OR REPLACE FUNCTION redrive_failures_write() RETURNS trigger
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

DROP INDEX failure_records_cluster_created_idx;
ALTER TABLE failure_records DROP COLUMN cluster;
