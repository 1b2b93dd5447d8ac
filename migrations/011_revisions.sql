-- +goose Up

-- A repair: an operator's edit of a failure's record, resent in place of the original. The
-- original stays in failures, unchanged; each edit is a revision here (docs/api.md, "Repair").
CREATE TABLE failure_revisions (
    id            bigint      GENERATED ALWAYS AS IDENTITY,
    failure_id    uuid        NOT NULL,
    principal     text        NOT NULL,
    reason        text        NOT NULL,
    target_topic  text        NOT NULL,
    key           bytea,
    value         bytea,
    header_names  text[]      NOT NULL,
    header_values bytea[]     NOT NULL,
    created_at    timestamptz NOT NULL,
    outcome       text,
    outcome_error text,
    resent_at     timestamptz,
    CONSTRAINT failure_revisions_pkey PRIMARY KEY (id),
    CONSTRAINT failure_revisions_failure_fkey FOREIGN KEY (failure_id) REFERENCES failures (id) ON DELETE CASCADE,
    CONSTRAINT failure_revisions_headers_check CHECK (cardinality(header_names) = cardinality(header_values))
);
COMMENT ON TABLE failure_revisions IS 'Operators'' edits of failed records, resent instead of the stored original (which stays unchanged).';
COMMENT ON COLUMN failure_revisions.value IS 'The edited value; NULL for a tombstone.';
COMMENT ON COLUMN failure_revisions.outcome IS 'resent, failed or conflict once the resend of the revision settled; NULL before.';
CREATE INDEX failure_revisions_failure_idx ON failure_revisions (failure_id, id);

-- +goose Down
DROP TABLE failure_revisions;
