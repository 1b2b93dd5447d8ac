// Package resend sends stored failures back to their original topic, byte for byte: the retry
// scheduler claims due RETRY_PENDING failures without a leader (FOR UPDATE SKIP LOCKED), the
// manual resend serves the API, and housekeeping deletes old terminal failures. Backoff is the
// retry policy shared with intake.
package resend
