-- +goose Up

-- Migration 020 replaced the table failures (and with it the triggers of migration 015 that
-- write failure.exhausted events) by a view over failure_records and failure_states. The state
-- lives in failure_states now, so the triggers move there: an event is written exactly when a
-- failure is stored as PERMANENT with its retries exhausted, or moves there from another state,
-- in the same transaction as that change (docs/notifications.md).
CREATE TRIGGER failure_states_notify_exhausted_insert AFTER INSERT ON failure_states
    FOR EACH ROW WHEN (NEW.state = 'PERMANENT' AND NEW.state_reason = 'retries exhausted')
    EXECUTE FUNCTION redrive_notify_event('failure.exhausted');
CREATE TRIGGER failure_states_notify_exhausted_update AFTER UPDATE OF state, state_reason ON failure_states
    FOR EACH ROW WHEN (NEW.state = 'PERMANENT' AND NEW.state_reason = 'retries exhausted'
                       AND (OLD.state <> 'PERMANENT' OR OLD.state_reason IS DISTINCT FROM 'retries exhausted'))
    EXECUTE FUNCTION redrive_notify_event('failure.exhausted');

-- +goose Down
DROP TRIGGER failure_states_notify_exhausted_update ON failure_states;
DROP TRIGGER failure_states_notify_exhausted_insert ON failure_states;
