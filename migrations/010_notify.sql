-- +goose Up

-- Outgoing notifications (docs/notifications.md): detectors on every instance find events and
-- insert one row per webhook and event here; the unique key makes each notification exist
-- once however many instances detect it. Deliverers claim due rows with SKIP LOCKED.
CREATE TABLE notify_outbox (
    id              bigint      GENERATED ALWAYS AS IDENTITY,
    webhook         text        NOT NULL,
    event_type      text        NOT NULL,
    dedupe_key      text        NOT NULL,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    delivered_at    timestamptz,
    gave_up_at      timestamptz,
    last_error      text,
    CONSTRAINT notify_outbox_pkey PRIMARY KEY (id),
    CONSTRAINT notify_outbox_once_key UNIQUE (webhook, dedupe_key)
);
COMMENT ON TABLE notify_outbox IS 'One notification to one webhook: what happened, and its delivery.';
COMMENT ON COLUMN notify_outbox.dedupe_key IS 'Names the event (e.g. group.new:42) so that it is notified once per webhook.';
COMMENT ON COLUMN notify_outbox.next_attempt_at IS 'When the next delivery attempt is due; a deliverer moves it ahead while it holds the row.';
CREATE INDEX notify_outbox_due_idx ON notify_outbox (next_attempt_at, id) WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX notify_outbox_created_idx ON notify_outbox (created_at DESC, id DESC);

-- Each delivery attempt, for the admins' delivery log.
CREATE TABLE notify_attempts (
    outbox_id   bigint      NOT NULL,
    attempt     integer     NOT NULL,
    at          timestamptz NOT NULL,
    status      integer,
    error       text,
    duration_ms integer     NOT NULL,
    CONSTRAINT notify_attempts_pkey PRIMARY KEY (outbox_id, attempt),
    CONSTRAINT notify_attempts_outbox_fkey FOREIGN KEY (outbox_id) REFERENCES notify_outbox (id) ON DELETE CASCADE
);
COMMENT ON TABLE notify_attempts IS 'Delivery attempts of notifications: HTTP status or error, and duration.';

-- Where each detector got to: events before it are notified (an overlap covers late commits).
CREATE TABLE notify_watermarks (
    detector text        NOT NULL,
    at       timestamptz NOT NULL,
    CONSTRAINT notify_watermarks_pkey PRIMARY KEY (detector)
);

-- +goose Down
DROP TABLE notify_watermarks;
DROP TABLE notify_attempts;
DROP TABLE notify_outbox;
