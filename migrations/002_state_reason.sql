-- +goose Up

-- state_reason says why a failure entered its state when the temporality alone does not tell,
-- e.g. a TEMPORARY failure that became PERMANENT because its retries were exhausted.
ALTER TABLE failures ADD COLUMN state_reason text;
COMMENT ON COLUMN failures.state_reason IS 'Why the failure entered its state when the temporality does not tell, e.g. ''retries exhausted''; NULL otherwise.';

-- +goose Down
ALTER TABLE failures DROP COLUMN state_reason;
