// Package resendtype is the vocabulary of resends on an operator's request — requests,
// outcomes, revisions, errors and the headers a resend adds — without the Kafka producer that
// package resend builds on librdkafka (cgo). The operator core and the translators above it
// (api, web) speak it, so that they build with CGO_ENABLED=0; package resend implements it.
package resendtype

import (
	"github.com/google/uuid"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
)

// ErrClosed means the resender was shut down: nothing more is sent.
//
// Deprecated: use redrive.ErrClosed, the same value.
var ErrClosed = redrive.ErrClosed

// ErrInvalidRequest means a manual resend request cannot be served as asked (no principal, too
// many ids); nothing was resent.
//
// Deprecated: use redrive.ErrInvalidRequest, the same value.
var ErrInvalidRequest = redrive.ErrInvalidRequest

// AuditActionRetry is the audit_log action of a manual resend (and of a retry job's item).
const AuditActionRetry = "retry"

// HeaderRevision names, on a resent record, the revision (an operator's repair) it carries
// instead of the stored original.
const HeaderRevision = "redrive-revision"

// HeaderJobItem names, on a record a job resent, the job item it was sent for:
// "<job id>/<item seq>". A job that resumes after a crash looks for it on the topic to learn
// which of its in-flight records reached the broker, so that it never sends one twice.
const HeaderJobItem = "redrive-job-item"

// Outcome is what became of one resend.
//
// Deprecated: use redrive.Outcome, the same type.
type Outcome = redrive.Outcome

// The outcomes of a resend.
//
// Deprecated: use redrive's, the same values.
const (
	OutcomeResent    = redrive.OutcomeResent
	OutcomeNotFound  = redrive.OutcomeNotFound
	OutcomeConflict  = redrive.OutcomeConflict
	OutcomeFailed    = redrive.OutcomeFailed
	OutcomeExhausted = redrive.OutcomeExhausted
)

// ManualRequest says who asks for a manual resend and why; both go to the audit log.
type ManualRequest struct {
	// Principal is the operator (or API client) asking. Required.
	Principal string
	// Reason is the operator's explanation. Optional.
	Reason string
	// Details are added to the details of every audit entry written (e.g. a bulk action's id).
	Details map[string]any
	// TargetTopic, when set, sends the records to this topic instead of their original one
	// (partitioned by key).
	TargetTopic string
	// TargetCluster, when set, sends the records to this configured Kafka cluster instead of
	// the one each was read from; only along an allowed route (resend.Config.CrossCluster).
	TargetCluster string
	// Headers, when set, are added after each record's headers (e.g. avro.HeaderRelease when
	// an operator closed an ordering guard's head with release).
	Headers []avro.Header
}

// ItemResult is the outcome of a manual resend for one id.
type ItemResult struct {
	ID      uuid.UUID
	Outcome Outcome
	// State is the failure's state before the request; empty when not found.
	State redrive.State
	// Error says why the outcome is not OutcomeResent; empty otherwise.
	Error string
}

// ManualResult holds one ItemResult per distinct requested id, in request order, and the count
// of each outcome.
type ManualResult struct {
	Items    []ItemResult
	Resent   int
	NotFound int
	Conflict int
	Failed   int
}

// Revision is what a repair sends instead of the stored original: the record as the operator
// edited it, to Topic.
type Revision struct {
	// ID names the revision; the record carries it in the HeaderRevision header.
	ID    int64
	Topic string
	Key   []byte // nil for a null key
	Value []byte // nil for a null value (a tombstone)
	// Headers are the record's headers in order (the resend headers are added as for any
	// resend).
	Headers []avro.Header
}

// Tagged is a record sent with a HeaderJobItem header, as a search for it on the broker
// names it.
type Tagged struct {
	// Cluster is the Kafka cluster the record was sent to; "" is store.DefaultCluster.
	Cluster string
	// Topic is where the record was sent.
	Topic string
	// Partition is the partition it was sent to; -1 when the producer chose (by key).
	Partition int32
	// Tag is the value of its HeaderJobItem header.
	Tag string
}
