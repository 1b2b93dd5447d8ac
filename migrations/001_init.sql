-- +goose Up

-- failure_groups gathers failures of the same kind so that operators can handle them together.
CREATE TABLE failure_groups (
    id                bigint GENERATED ALWAYS AS IDENTITY,
    publisher_service text        NOT NULL,
    message_type      text        NOT NULL DEFAULT '',
    error_code        text        NOT NULL,
    stack_trace_hash  text        NOT NULL DEFAULT '',
    ticket            text,
    note              text,
    first_seen        timestamptz NOT NULL DEFAULT now(),
    last_seen         timestamptz NOT NULL DEFAULT now(),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT failure_groups_pkey PRIMARY KEY (id),
    CONSTRAINT failure_groups_kind_key UNIQUE (publisher_service, message_type, error_code, stack_trace_hash)
);
COMMENT ON TABLE failure_groups IS 'Failures of one kind: same publisher service, message type, error code and stack trace hash.';
COMMENT ON COLUMN failure_groups.message_type IS 'Message type name from the failed message metadata; empty when unknown.';
COMMENT ON COLUMN failure_groups.stack_trace_hash IS 'stackTraceHash of the event; empty when absent.';
COMMENT ON COLUMN failure_groups.ticket IS 'Operator-set issue tracker reference.';

-- failures holds one row per MessageProcessingFailedEvent received on the error topic.
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
    original_value         bytea       NOT NULL,
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
    lease_owner            text,
    lease_until            timestamptz,
    closed_reason          text,
    closed_by              text,
    closed_at              timestamptz,
    group_id               bigint      NOT NULL,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT failures_pkey PRIMARY KEY (id),
    CONSTRAINT failures_idempotence_id_key UNIQUE (idempotence_id),
    CONSTRAINT failures_state_check CHECK (state IN ('RETRY_PENDING', 'PERMANENT', 'RESENT', 'CLOSED')),
    CONSTRAINT failures_temporality_check CHECK (temporality IN ('TEMPORARY', 'PERMANENT', 'UNKNOWN')),
    CONSTRAINT failures_headers_check CHECK (cardinality(header_names) = cardinality(header_values)),
    CONSTRAINT failures_attempt_check CHECK (attempt >= 1),
    CONSTRAINT failures_pending_has_next_check CHECK (state <> 'RETRY_PENDING' OR next_attempt_at IS NOT NULL),
    CONSTRAINT failures_closed_has_reason_check CHECK (state <> 'CLOSED' OR closed_reason IS NOT NULL),
    CONSTRAINT failures_group_fkey FOREIGN KEY (group_id) REFERENCES failure_groups (id)
);
COMMENT ON TABLE failures IS 'One row per MessageProcessingFailedEvent; idempotent on idempotence_id.';
COMMENT ON COLUMN failures.state IS 'RETRY_PENDING, PERMANENT, RESENT or CLOSED (docs/states.md).';
COMMENT ON COLUMN failures.event_created IS 'identity.created of the event: when the consumer failed.';
COMMENT ON COLUMN failures.original_key IS 'Key bytes of the failed record exactly; NULL for a null key.';
COMMENT ON COLUMN failures.original_value IS 'Value bytes of the failed record exactly.';
COMMENT ON COLUMN failures.header_names IS 'Header names of the failed record, in order, duplicates kept.';
COMMENT ON COLUMN failures.header_values IS 'Header values, parallel to header_names; a NULL element is a null value.';
COMMENT ON COLUMN failures.causing_message IS 'Identity of the causing message: metadata eventId, else the redrive-origin header, else topic/partition/offset.';
COMMENT ON COLUMN failures.attempt IS 'Failure number of the causing message: 1 for its first failure, 2 after one resend failed again, ...';
COMMENT ON COLUMN failures.next_attempt_at IS 'When the scheduler resends a RETRY_PENDING failure.';
COMMENT ON COLUMN failures.resend_failures IS 'Resends of this row that the broker did not acknowledge.';
COMMENT ON COLUMN failures.lease_until IS 'A scheduler instance claimed the row until then; an expired lease returns it.';

CREATE INDEX failures_created_idx ON failures (created_at, id);
CREATE INDEX failures_state_created_idx ON failures (state, created_at, id);
CREATE INDEX failures_topic_created_idx ON failures (original_topic, created_at, id);
CREATE INDEX failures_group_state_idx ON failures (group_id, state);
CREATE INDEX failures_causing_idx ON failures (causing_message, attempt);
CREATE INDEX failures_due_idx ON failures (next_attempt_at) WHERE state = 'RETRY_PENDING';

-- audit_log records every operator action.
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
CREATE INDEX audit_log_failure_idx ON audit_log (failure_id, at);
CREATE INDEX audit_log_group_idx ON audit_log (group_id, at) WHERE group_id IS NOT NULL;

-- +goose Down
DROP TABLE audit_log;
DROP TABLE failures;
DROP TABLE failure_groups;
