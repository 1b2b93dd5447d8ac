// Package resend sends stored failures back to their original topic, byte for byte, and keeps
// the failure store tidy.
//
// A [Scheduler] runs on every service instance, without a leader: every Interval it claims due
// RETRY_PENDING failures in batches (one claim row per batch, with an expiry; claims are taken
// one at a time, so no two instances hold the same failure), produces the stored key, value and
// headers to the original topic with an idempotent acks=all producer, waits for the
// acknowledgements and marks the failures RESENT. Within a round the three run as a pipeline:
// one claimer walks the due index in order, several senders each load one batch's records and
// wait for its acknowledgements, and the marker marks acknowledged batches in combined
// statements, with bounded queues between them.
// A resent record carries the headers jeap_eh_target_service, jeap_eh_error_handling_service
// and redrive-origin exactly once each ([ResendHeaders]). A record the broker does not
// acknowledge leaves its failure due again later ([DefaultSendBackoff]); a crash between the
// acknowledgement and the mark resends it once more when the claim expires (at-least-once).
//
// The [Resender] serves the API's manual resends by id, rate limited and audited, with one
// [ItemResult] per id. Housekeeping, run by the same Scheduler, deletes old RESENT, CLOSED and
// PERMANENT failures and the groups they leave empty.
//
// [Backoff] is the retry policy shared with intake: 30 s × 2^attempt, capped at 24 h, ±10 %
// jitter, 15 attempts, then PERMANENT with reason [ReasonRetriesExhausted].
//
// docs/resend.md describes the design, the guarantees, the configuration and the metrics.
package resend
