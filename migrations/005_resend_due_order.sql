-- +goose Up

-- The resend scheduler claims due failures in batches, in the order (next_attempt_at, id), each
-- claim starting after the last row of the one before. With id in the index that is one range
-- scan of the rows it claims: the rows leased by earlier claims (still RETRY_PENDING until they
-- are marked RESENT) are not read again, and rows due at the same instant still have an order.
-- Neither column changes when a row is leased, so a claim can stay a HOT update (migration 003).
CREATE INDEX failures_due_order_idx ON failures (next_attempt_at, id) WHERE state = 'RETRY_PENDING';
DROP INDEX failures_due_idx;
ALTER INDEX failures_due_order_idx RENAME TO failures_due_idx;

-- +goose Down
CREATE INDEX failures_due_single_idx ON failures (next_attempt_at) WHERE state = 'RETRY_PENDING';
DROP INDEX failures_due_idx;
ALTER INDEX failures_due_single_idx RENAME TO failures_due_idx;
