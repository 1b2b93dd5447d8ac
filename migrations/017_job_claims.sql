-- +goose Up

-- A job's batch claims its failures as any resend does, with a row in resend_claims, and that
-- row names the job and the job items it was taken for. It holds its failures until the job
-- records the batch's outcome (lease_until is 'infinity': no other resend takes them, and no
-- expiry deletes the claim), so a job that resumes after a crash finds its own in-flight batch
-- and settles it instead of mistaking it for another resend (docs/api.md, "Jobs").
ALTER TABLE resend_claims ADD COLUMN job_id uuid, ADD COLUMN job_seqs bigint[];
ALTER TABLE resend_claims ADD CONSTRAINT resend_claims_job_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE;
ALTER TABLE resend_claims ADD CONSTRAINT resend_claims_job_check
    CHECK ((job_id IS NULL) = (job_seqs IS NULL) AND (job_seqs IS NULL OR cardinality(job_seqs) = cardinality(failure_ids)));
CREATE INDEX resend_claims_job_idx ON resend_claims (job_id) WHERE job_id IS NOT NULL;
COMMENT ON COLUMN resend_claims.job_id IS 'The job whose batch this claim is; NULL for the scheduler''s and manual resends.';
COMMENT ON COLUMN resend_claims.job_seqs IS 'The job_items.seq of each failure_ids element, in the same order; NULL without a job.';

-- +goose Down
DROP INDEX resend_claims_job_idx;
ALTER TABLE resend_claims DROP CONSTRAINT resend_claims_job_check;
ALTER TABLE resend_claims DROP CONSTRAINT resend_claims_job_fkey;
ALTER TABLE resend_claims DROP COLUMN job_seqs, DROP COLUMN job_id;
