-- +goose Up

-- redrive_trace_id (migration 009) is evaluated for every row version that failures gets: the
-- partial index failures_trace_id_idx tests it for each one. As a SQL function with a query in
-- it (unnest, ORDER BY, LIMIT) each call ran a small query plan, about 11 µs; a change of state
-- (a new row version, docs/benchmarks.md "jobs") paid it even for a record without a
-- traceparent header. The same function in PL/pgSQL loops over the names and costs about 3 µs
-- without a traceparent header. Its results are the same for every input (the last non-null
-- traceparent value, matched with the same pattern); the index is rebuilt all the same.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_trace_id(names text[], vals bytea[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    i integer;
    v bytea;
BEGIN
    IF names IS NULL OR vals IS NULL THEN
        RETURN NULL;
    END IF;
    -- From the last header to the first: the last traceparent with a value decides.
    FOR i IN REVERSE cardinality(names)..1 LOOP
        IF lower(names[array_lower(names, 1) + i - 1]) = 'traceparent' THEN
            v := vals[array_lower(vals, 1) + i - 1];
            IF v IS NOT NULL THEN
                RETURN substring(encode(substring(v from 1 for 64), 'escape') from '^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}');
            END IF;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
REINDEX INDEX failures_trace_id_idx;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_trace_id(names text[], vals bytea[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT substring(encode(substring(h.v from 1 for 64), 'escape') from '^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}')
    FROM unnest(names, vals) WITH ORDINALITY AS h(n, v, i)
    WHERE lower(h.n) = 'traceparent' AND h.v IS NOT NULL
    ORDER BY h.i DESC LIMIT 1
$$;
-- +goose StatementEnd
REINDEX INDEX failures_trace_id_idx;
