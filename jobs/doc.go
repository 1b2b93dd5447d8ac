// Package jobs runs durable jobs: the retries, resends to another topic and closes of a pinned
// selection of failures that operators preview and start through the operator core. A
// [Runner] runs on every service instance, without a leader.
//
// A runner claims running jobs that no other instance holds (SKIP LOCKED, with a lease) and
// runs each one it holds in its own goroutine, up to Config.MaxJobs at once. Each job has one
// rate limiter, at the job's rate_limit; nothing else limits or re-chunks its batches. A batch
// holds one of the instance's Config.MaxBatches slots while it is claimed, sent and settled; a
// job waiting on its rate limit holds none, so a slow job never delays another. A batch of a retry job goes through three steps:
//
//   - claim: one transaction claims the batch's failures with a resend claim that names the
//     job and its items and holds them until the batch is settled (no other resend takes
//     them), and records the items that cannot be resent as skipped, with the reason;
//   - send: the records are produced (the stored originals, plus the resend headers and a
//     redrive-job-item header naming the job item) and their acknowledgements awaited;
//   - settle: one transaction deletes the claim, marks the acknowledged failures RESENT,
//     records the sends that were not acknowledged, records each item's outcome with the
//     job's counts, and writes the batch's one audit entry, which each item it acted on
//     names (store.FailureAudit shows it as each failure's entry). The outcome of a resend is
//     recorded with its mark, so no reconciliation is needed.
//
// A close job's batch is one transaction (close and record).
//
// Guarantees (docs/api.md, "Jobs"; docs/operations.md):
//
//   - Exact accounting: every item ends done, skipped (with the reason) or failed exactly as
//     it happened. A stop (SIGTERM, pause, cancel) never records a not-attempted item as
//     failed: a batch waiting on the rate limiter has claimed nothing, and records not sent
//     because the producer shut down stay pending. A job becomes DONE only when every item
//     has its outcome.
//   - Never twice: an instance that dies between claim and settle leaves its claim. The
//     instance that resumes the job (after the lease) recognises the claim as the job's own,
//     asks the broker which of the claim's records arrived (by their redrive-job-item header,
//     Publisher.Delivered), counts those done and sends only the others. A claim of a job
//     paused or canceled meanwhile is settled the same way, without sending.
//   - Cancel and pause take effect within Config.Heartbeat (250 ms by default): the job's
//     heartbeat sees the change and ends the job's context, which ends a wait on the rate
//     limiter at once; a batch already sending is settled.
package jobs
