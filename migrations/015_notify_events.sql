-- +goose Up

-- Notifications come from a transactional outbox (docs/notifications.md). The events that are
-- notified (a new group, a failure whose retries are exhausted, a finished job) are written here
-- by triggers, in the same transaction as the change itself: an event exists exactly when its
-- change committed, whatever path made it (intake, scheduler, jobs, import, SQL by hand). The
-- notifier takes events with FOR UPDATE SKIP LOCKED and, in one transaction, deletes them and
-- writes one notify_outbox row per webhook. Nothing is read by time, so no late commit is
-- missed and no number of events in a burst holds the notifier back; a notifier that dies
-- mid-batch leaves its events to the others (its transaction rolls back).
-- This replaces the timestamp watermarks of migration 010.
CREATE TABLE notify_events (
    id         bigint      GENERATED ALWAYS AS IDENTITY,
    event_type text        NOT NULL,
    subject    text        NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT notify_events_pkey PRIMARY KEY (id),
    CONSTRAINT notify_events_type_check CHECK (event_type IN ('group.new', 'failure.exhausted', 'job.finished'))
);
COMMENT ON TABLE notify_events IS 'Events not yet turned into notifications; written by triggers, deleted by the notifier.';
COMMENT ON COLUMN notify_events.subject IS 'What the event is about: the group id (group.new), the failure id (failure.exhausted), the job id (job.finished).';
COMMENT ON COLUMN notify_events.at IS 'When the change that made the event began (its transaction''s start).';

-- +goose StatementBegin
CREATE FUNCTION redrive_notify_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- TG_ARGV[0] is the event type; the subject is the row's id.
    INSERT INTO notify_events (event_type, subject) VALUES (TG_ARGV[0], NEW.id::text);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER failure_groups_notify_new AFTER INSERT ON failure_groups
    FOR EACH ROW EXECUTE FUNCTION redrive_notify_event('group.new');

-- A failure is exhausted when it is stored as PERMANENT with its retries exhausted, or moves
-- there from another state. The WHEN clauses keep the cost off every other row.
CREATE TRIGGER failures_notify_exhausted_insert AFTER INSERT ON failures
    FOR EACH ROW WHEN (NEW.state = 'PERMANENT' AND NEW.state_reason = 'retries exhausted')
    EXECUTE FUNCTION redrive_notify_event('failure.exhausted');
CREATE TRIGGER failures_notify_exhausted_update AFTER UPDATE OF state, state_reason ON failures
    FOR EACH ROW WHEN (NEW.state = 'PERMANENT' AND NEW.state_reason = 'retries exhausted'
                       AND (OLD.state <> 'PERMANENT' OR OLD.state_reason IS DISTINCT FROM 'retries exhausted'))
    EXECUTE FUNCTION redrive_notify_event('failure.exhausted');

CREATE TRIGGER jobs_notify_finished_insert AFTER INSERT ON jobs
    FOR EACH ROW WHEN (NEW.state IN ('DONE', 'CANCELED'))
    EXECUTE FUNCTION redrive_notify_event('job.finished');
CREATE TRIGGER jobs_notify_finished_update AFTER UPDATE OF state ON jobs
    FOR EACH ROW WHEN (NEW.state IN ('DONE', 'CANCELED') AND OLD.state NOT IN ('DONE', 'CANCELED'))
    EXECUTE FUNCTION redrive_notify_event('job.finished');

DROP TABLE notify_watermarks;

-- +goose Down
CREATE TABLE notify_watermarks (
    detector text        NOT NULL,
    at       timestamptz NOT NULL,
    CONSTRAINT notify_watermarks_pkey PRIMARY KEY (detector)
);
DROP TRIGGER jobs_notify_finished_update ON jobs;
DROP TRIGGER jobs_notify_finished_insert ON jobs;
DROP TRIGGER failures_notify_exhausted_update ON failures;
DROP TRIGGER failures_notify_exhausted_insert ON failures;
DROP TRIGGER failure_groups_notify_new ON failure_groups;
DROP FUNCTION redrive_notify_event();
DROP TABLE notify_events;
