-- +goose Up

-- A job retries or closes a selection of failures in the background, on any instance. Its
-- preview pins the selection: the failures are listed in job_items when the preview is made,
-- and running the job acts on exactly those (docs/jobs.md).
CREATE TABLE jobs (
    id                 uuid        NOT NULL DEFAULT gen_random_uuid(),
    action             text        NOT NULL,
    state              text        NOT NULL,
    principal          text        NOT NULL,
    reason             text,
    selection          jsonb       NOT NULL,
    rate_limit         double precision NOT NULL,
    token_hash         bytea       NOT NULL,
    total              bigint      NOT NULL,
    done               bigint      NOT NULL DEFAULT 0,
    skipped            bigint      NOT NULL DEFAULT 0,
    failed             bigint      NOT NULL DEFAULT 0,
    cursor_seq         bigint      NOT NULL DEFAULT 0,
    owner              text,
    lease_until        timestamptz,
    created_at         timestamptz NOT NULL,
    preview_expires_at timestamptz NOT NULL,
    started_at         timestamptz,
    finished_at        timestamptz,
    updated_at         timestamptz NOT NULL,
    CONSTRAINT jobs_pkey PRIMARY KEY (id),
    CONSTRAINT jobs_action_check CHECK (action IN ('retry', 'close')),
    CONSTRAINT jobs_state_check CHECK (state IN ('PREVIEW', 'RUNNING', 'PAUSED', 'CANCELED', 'DONE')),
    CONSTRAINT jobs_rate_check CHECK (rate_limit > 0),
    CONSTRAINT jobs_counts_check CHECK (done >= 0 AND skipped >= 0 AND failed >= 0 AND done + skipped + failed <= total)
);
COMMENT ON TABLE jobs IS 'Background retries and closes of a pinned selection of failures.';
COMMENT ON COLUMN jobs.selection IS 'How the selection was made (filter or ids), for display and audit; the pinned failures are in job_items.';
COMMENT ON COLUMN jobs.rate_limit IS 'Items per second the job acts on at most.';
COMMENT ON COLUMN jobs.token_hash IS 'SHA-256 of the preview token that starts the job; the token itself is never stored.';
COMMENT ON COLUMN jobs.cursor_seq IS 'The highest job_items.seq whose outcome is recorded: the job resumes after it.';
COMMENT ON COLUMN jobs.owner IS 'The instance running the job while lease_until is in the future.';
CREATE INDEX jobs_runnable_idx ON jobs (created_at) WHERE state = 'RUNNING';
CREATE INDEX jobs_created_idx ON jobs (created_at DESC, id DESC);

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
CREATE INDEX job_items_pending_idx ON job_items (job_id, seq) WHERE outcome IS NULL;
COMMENT ON TABLE job_items IS 'The failures a job acts on, pinned at its preview, in order, with each outcome once known.';
COMMENT ON COLUMN job_items.outcome IS 'done (the action applied), skipped (not found, or its state changed since the preview), failed (attempted, did not succeed); NULL until acted on.';

-- A job's audit entries (its own and its items') carry its id in details.
CREATE INDEX audit_log_job_idx ON audit_log ((details->>'job_id'), at) WHERE details ? 'job_id';

-- +goose Down
DROP INDEX audit_log_job_idx;
DROP TABLE job_items;
DROP TABLE jobs;
