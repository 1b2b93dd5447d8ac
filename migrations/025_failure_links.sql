-- +goose Up

-- The ordering guard's chains (docs/errorhandler.md, "Releasing a chain"), stored. A record the
-- consumer's guard parked (error code PARKED_BEHIND) names the head it waits for in its MPFE
-- (the metadata map entry redrive-parked-head); the intake writes that reference here, next to
-- the write-once record, so that the chain of a head is read by the stored link instead of
-- being derived from topic, partition and key at query time.
CREATE TABLE failure_links (
    failure_id uuid        NOT NULL,
    created_at timestamptz NOT NULL,
    head       text        NOT NULL,
    head_event text,
    CONSTRAINT failure_links_pkey PRIMARY KEY (failure_id)
);
CREATE INDEX failure_links_head_idx ON failure_links (head, created_at);
COMMENT ON TABLE failure_links IS 'One row per failure the ordering guard parked: the head it was parked behind. Written by the intake with the failure, never updated; a link whose failure retention dropped is ignored by every read (joined by failure_id and created_at) and deleted by housekeeping after the drop.';
COMMENT ON COLUMN failure_links.failure_id IS 'The parked failure (failure_records.id).';
COMMENT ON COLUMN failure_links.created_at IS 'The parked failure''s created_at: where its record and state are.';
COMMENT ON COLUMN failure_links.head IS 'The head''s causing message (failure_records.causing_message), or "overflow:topic/partition@offset" when the consumer''s guard overflowed (no head failure).';
COMMENT ON COLUMN failure_links.head_event IS 'The event id of the head''s MPFE (redrive-parked-behind), when the MPFE named it.';

-- Failures stored before the links: the head of a parked failure is the nearest causing
-- message of the same topic, partition and key, at an earlier first offset, whose latest
-- failure is not parked (the chain as it was derived before).
WITH parked_keys AS (
    SELECT DISTINCT original_topic, original_partition, original_key
    FROM failures WHERE error_code = 'PARKED_BEHIND' AND original_key IS NOT NULL
), members AS (
    SELECT f.causing_message, f.original_topic, f.original_partition, f.original_key,
           (array_agg(f.original_offset ORDER BY f.attempt))[1] AS first_offset,
           (array_agg(f.error_code ORDER BY f.attempt DESC))[1] AS last_code
    FROM failures f
    JOIN parked_keys k USING (original_topic, original_partition, original_key)
    GROUP BY f.causing_message, f.original_topic, f.original_partition, f.original_key
)
INSERT INTO failure_links (failure_id, created_at, head)
SELECT p.id, p.created_at, h.causing_message
FROM failures p
JOIN members pm ON pm.causing_message = p.causing_message AND pm.original_topic = p.original_topic
    AND pm.original_partition = p.original_partition AND pm.original_key = p.original_key
CROSS JOIN LATERAL (
    SELECT m.causing_message FROM members m
    WHERE m.original_topic = pm.original_topic AND m.original_partition = pm.original_partition
      AND m.original_key = pm.original_key AND m.last_code <> 'PARKED_BEHIND' AND m.first_offset < pm.first_offset
    ORDER BY m.first_offset DESC LIMIT 1) h
WHERE p.error_code = 'PARKED_BEHIND'
ON CONFLICT DO NOTHING;

-- A release in progress: the failures parked behind a resolved head (resent, or closed with
-- release) are being resent in offset order. The row is written before the first of them is
-- sent and deleted after the last, so that a release that an instance's end interrupted is
-- finished, each failure once, by the resender that claims it after its lease.
CREATE TABLE chain_releases (
    id          uuid        NOT NULL,
    head_id     uuid        NOT NULL,
    head        text        NOT NULL,
    release     boolean     NOT NULL,
    after_offset bigint,
    principal   text        NOT NULL,
    reason      text,
    trigger     text        NOT NULL,
    details     jsonb       NOT NULL DEFAULT '{}',
    job_id      uuid,
    job_reserved integer    NOT NULL DEFAULT 0,
    owner       text        NOT NULL,
    lease_until timestamptz NOT NULL,
    created_at  timestamptz NOT NULL,
    CONSTRAINT chain_releases_pkey PRIMARY KEY (id),
    CONSTRAINT chain_releases_trigger_check CHECK (trigger IN ('auto', 'manual'))
);
CREATE INDEX chain_releases_lease_idx ON chain_releases (lease_until);
COMMENT ON TABLE chain_releases IS 'Releases of ordering chains in progress: the open failures linked to head (failure_links) are resent in offset order; deleted when done.';
COMMENT ON COLUMN chain_releases.head IS 'The resolved head''s causing message (failure_links.head).';
COMMENT ON COLUMN chain_releases.release IS 'The head was closed with release: each resend carries the redrive-release header.';
COMMENT ON COLUMN chain_releases.after_offset IS 'Only the followers parked at a later offset are released (a parked failure resent behind a closed head releases those after it); NULL for all.';
COMMENT ON COLUMN chain_releases.job_id IS 'The retry job whose item the head was: each follower is recorded as an item of it.';
COMMENT ON COLUMN chain_releases.job_reserved IS 'Followers counted in the job''s total whose item is not recorded yet: the job is not DONE before they are.';
COMMENT ON COLUMN chain_releases.lease_until IS 'The owner holds the release until then; after it any resender finishes it.';
-- The audit entries of a release's followers name it: the resender that finishes a release
-- reads which followers were resent from them (written with each follower's state change).
CREATE INDEX audit_log_release_idx ON audit_log ((details->>'release_id')) WHERE details ? 'release_id';

-- +goose Down
DROP INDEX audit_log_release_idx;
DROP TABLE chain_releases;
DROP TABLE failure_links;
