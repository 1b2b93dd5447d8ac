-- +goose Up

-- A job may resend its failures to another topic than their original one.
ALTER TABLE jobs ADD COLUMN target_topic text;
ALTER TABLE jobs DROP CONSTRAINT jobs_action_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_action_check CHECK (action IN ('retry', 'close', 'resend_to'));
ALTER TABLE jobs ADD CONSTRAINT jobs_target_topic_check CHECK ((action = 'resend_to') = (target_topic IS NOT NULL));
COMMENT ON COLUMN jobs.target_topic IS 'The topic a resend_to job sends the failures to; NULL for other actions.';

-- +goose Down
DELETE FROM jobs WHERE action = 'resend_to';
ALTER TABLE jobs DROP CONSTRAINT jobs_target_topic_check;
ALTER TABLE jobs DROP CONSTRAINT jobs_action_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_action_check CHECK (action IN ('retry', 'close'));
ALTER TABLE jobs DROP COLUMN target_topic;
