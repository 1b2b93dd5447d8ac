-- +goose Up

-- Every change of a failure's state writes a new version of its row, and every index of the
-- table gets an entry for it (state is indexed, so the update cannot be HOT): each index costs
-- every move to RESENT or CLOSED (docs/benchmarks.md, "jobs"). The hash index on the whole key
-- (migration 004) served only the exact key filter, which the key prefix index of migration 009
-- serves as well: the filter compares the first 256 bytes through that index and the whole key
-- on the rows it finds (store.Filter.Key).
DROP INDEX failures_key_idx;

-- +goose Down
CREATE INDEX failures_key_idx ON failures USING hash (original_key);
