-- +goose Up

-- A resend claims failures a batch at a time: one row here names the failures of one batch and
-- holds them for its owner until lease_until. Before, a claim wrote a lease into every failure it
-- claimed (lease_owner, lease_until), one row update per failure; now it writes one row per
-- batch, and the failures are written once, when their outcome is known (docs/resend.md,
-- docs/benchmarks.md). Claims are taken one at a time under a transaction-level advisory lock
-- (store/claims.go), so no two live claims name the same failure; an expired claim no longer
-- holds its failures, and the next claim deletes it.
CREATE TABLE resend_claims (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    owner       text        NOT NULL,
    claimed_at  timestamptz NOT NULL,
    lease_until timestamptz NOT NULL,
    failure_ids uuid[]      NOT NULL,
    CONSTRAINT resend_claims_pkey PRIMARY KEY (id),
    CONSTRAINT resend_claims_lease_check CHECK (lease_until > claimed_at),
    CONSTRAINT resend_claims_ids_check CHECK (cardinality(failure_ids) > 0 AND array_position(failure_ids, NULL) IS NULL)
);
COMMENT ON TABLE resend_claims IS 'Failures that a resend (scheduled or manual) holds while it sends them; one row per batch.';
COMMENT ON COLUMN resend_claims.owner IS 'The instance that claimed the batch: its InstanceID, with /manual for a manual resend.';
COMMENT ON COLUMN resend_claims.lease_until IS 'The claim holds its failures until then; an expired claim returns them.';
COMMENT ON COLUMN resend_claims.failure_ids IS 'The claimed failures (failures.id); a failure leaves the claim when the claim is deleted.';

-- Leases taken by an older version and still running become claims, one per owner.
INSERT INTO resend_claims (owner, claimed_at, lease_until, failure_ids)
SELECT lease_owner, now() - interval '1 second', max(lease_until), array_agg(id ORDER BY id)
FROM failures
WHERE lease_owner IS NOT NULL AND lease_until > now()
GROUP BY lease_owner;

ALTER TABLE failures DROP COLUMN lease_owner, DROP COLUMN lease_until;

-- The 30 % of free room per page kept for HOT lease updates (migration 003) has no use now.
-- It applies to pages written from now on.
ALTER TABLE failures RESET (fillfactor);

-- +goose Down
ALTER TABLE failures SET (fillfactor = 70);
ALTER TABLE failures ADD COLUMN lease_owner text, ADD COLUMN lease_until timestamptz;
COMMENT ON COLUMN failures.lease_until IS 'A scheduler instance claimed the row until then; an expired lease returns it.';
UPDATE failures f SET lease_owner = c.owner, lease_until = c.lease_until
FROM (SELECT DISTINCT ON (u.failure_id) u.failure_id, c.owner, c.lease_until
      FROM resend_claims c, unnest(c.failure_ids) AS u(failure_id)
      WHERE c.lease_until > now()
      ORDER BY u.failure_id, c.lease_until DESC) AS c
WHERE f.id = c.failure_id;
DROP TABLE resend_claims;
