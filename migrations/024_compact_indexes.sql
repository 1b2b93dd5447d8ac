-- +goose Up

-- Narrower indexes on the records (docs/operations.md, "Sizing"). Measured over the api
-- benchmark's rows, the indexes of failure_records were 629 of the 2,288 bytes a failure took;
-- three of them stored more than their searches need:
--
--   failure_records_pkey (id, created_at) and failure_records_created_idx (created_at, id) held
--     the same two columns twice. The primary key is now (created_at, id): it orders every list,
--     and a lookup by id alone finds the failure's created_at through failure_states_pkey (id,
--     created_at) first, as every query joining the state does. Filled in created_at order, its
--     pages are full, where the random ids of the former key left them two thirds full.
--   failure_records_source_format_created_idx indexed every failure's source format, although
--     a list of the failures of the error topic's own format (mpfe, nearly all of them) walks the
--     primary key and finds one on nearly every entry: only the other formats are indexed now
--     (the store adds source_format <> 'mpfe' to a filter without mpfe, store/filter.go).
--   failure_records_trace_id_idx indexed the trace id as 32 characters of text: as a uuid it
--     takes 16 bytes (the filter compares redrive_trace_id(...)::uuid, store/filter.go).
--   failure_records_event_id_idx and failure_records_causing_idx held each event id and causing
--     message (mostly a UUID as text, 36 characters) in a btree; every search of them is an
--     equality (a list's filter, the attempt chain, the intake's count of earlier attempts), which
--     a hash index answers from a 4-byte hash code per failure (the row then confirms the text).
--
-- Each index is built while the records are locked against writes (SHARE): stop the intake
-- while it runs (docs/operations.md gives its time per million failures).

ALTER TABLE failure_records DROP CONSTRAINT failure_records_pkey;
DROP INDEX failure_records_created_idx;
ALTER TABLE failure_records ADD CONSTRAINT failure_records_pkey PRIMARY KEY (created_at, id);

DROP INDEX failure_records_source_format_created_idx;
CREATE INDEX failure_records_foreign_created_idx ON failure_records (source_format, created_at, id)
    WHERE source_format <> 'mpfe';

DROP INDEX failure_records_trace_id_idx;
CREATE INDEX failure_records_trace_id_idx ON failure_records ((redrive_trace_id(header_names, header_values)::uuid))
    WHERE redrive_trace_id(header_names, header_values) IS NOT NULL;

DROP INDEX failure_records_event_id_idx;
CREATE INDEX failure_records_event_id_idx ON failure_records USING hash (event_id);
DROP INDEX failure_records_causing_idx;
CREATE INDEX failure_records_causing_idx ON failure_records USING hash (causing_message);

-- Header arrays and keys longer than the TOAST threshold are compressed with lz4 (the value and
-- the error texts are since migration 020), faster than pglz at a similar ratio.
ALTER TABLE failure_records ALTER COLUMN header_values SET COMPRESSION lz4;
ALTER TABLE failure_records ALTER COLUMN original_key SET COMPRESSION lz4;

-- +goose Down
ALTER TABLE failure_records ALTER COLUMN original_key SET COMPRESSION default;
ALTER TABLE failure_records ALTER COLUMN header_values SET COMPRESSION default;
DROP INDEX failure_records_causing_idx;
CREATE INDEX failure_records_causing_idx ON failure_records (causing_message, attempt);
DROP INDEX failure_records_event_id_idx;
CREATE INDEX failure_records_event_id_idx ON failure_records (event_id);
DROP INDEX failure_records_trace_id_idx;
CREATE INDEX failure_records_trace_id_idx ON failure_records (redrive_trace_id(header_names, header_values))
    WHERE redrive_trace_id(header_names, header_values) IS NOT NULL;
DROP INDEX failure_records_foreign_created_idx;
CREATE INDEX failure_records_source_format_created_idx ON failure_records (source_format, created_at, id);
ALTER TABLE failure_records DROP CONSTRAINT failure_records_pkey;
ALTER TABLE failure_records ADD CONSTRAINT failure_records_pkey PRIMARY KEY (id, created_at);
CREATE INDEX failure_records_created_idx ON failure_records (created_at, id);
