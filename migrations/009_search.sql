-- +goose Up

-- Operators find one message by its key (or a prefix of it), its ids, its trace, a header,
-- its stack-trace hash or its group's ticket (docs/api.md, "Searching"). These indexes serve
-- the exact and prefix criteria; a header or payload search is bounded by the others.

-- The first 256 bytes of the key: a btree entry must stay small whatever the key's length.
CREATE INDEX failures_key_prefix_idx ON failures (substring(original_key from 1 for 256));
CREATE INDEX failures_event_id_idx ON failures (event_id);
CREATE INDEX failures_stack_trace_hash_idx ON failures (stack_trace_hash) WHERE stack_trace_hash IS NOT NULL;
CREATE INDEX failures_header_names_idx ON failures USING gin (header_names);

-- +goose StatementBegin
-- redrive_trace_id returns the trace id of the W3C traceparent among a record's headers (the
-- last one when there are several), or NULL: "00-<32 hex trace id>-<16 hex parent id>-<2 hex
-- flags>". A value not of that form has none. It never fails, whatever the bytes (encode with
-- 'escape' accepts any), since an index expression that fails would refuse the row.
CREATE FUNCTION redrive_trace_id(names text[], vals bytea[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT substring(encode(substring(h.v from 1 for 64), 'escape') from '^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}')
    FROM unnest(names, vals) WITH ORDINALITY AS h(n, v, i)
    WHERE lower(h.n) = 'traceparent' AND h.v IS NOT NULL
    ORDER BY h.i DESC LIMIT 1
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION redrive_trace_id(text[], bytea[]) IS 'The W3C trace id of the traceparent header among a failure''s original headers, or NULL.';
CREATE INDEX failures_trace_id_idx ON failures (redrive_trace_id(header_names, header_values))
    WHERE redrive_trace_id(header_names, header_values) IS NOT NULL;

-- "No ticket" and "ticket = X" select groups first.
CREATE INDEX failure_groups_ticket_idx ON failure_groups (ticket);

-- +goose Down
DROP INDEX failure_groups_ticket_idx;
DROP INDEX failures_trace_id_idx;
DROP FUNCTION redrive_trace_id(text[], bytea[]);
DROP INDEX failures_header_names_idx;
DROP INDEX failures_stack_trace_hash_idx;
DROP INDEX failures_event_id_idx;
DROP INDEX failures_key_prefix_idx;
