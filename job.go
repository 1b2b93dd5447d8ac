package redrive

import (
	"time"

	"github.com/google/uuid"
)

// JobState is the lifecycle state of a job (docs/jobs.md).
type JobState string

// The states of a job.
const (
	// JobPreview: the selection is pinned; the job waits for its token until it expires.
	JobPreview JobState = "PREVIEW"
	// JobRunning: an instance acts on its items (or will, once it claims the job).
	JobRunning JobState = "RUNNING"
	// JobPaused: no instance acts on it until it is resumed.
	JobPaused JobState = "PAUSED"
	// JobCanceled: stopped for good; items not acted on stay so.
	JobCanceled JobState = "CANCELED"
	// JobDone: every item has its outcome.
	JobDone JobState = "DONE"
)

// JobItemOutcome is what became of one item of a job.
type JobItemOutcome string

// The outcomes of a job item.
const (
	// JobItemDone: the action applied.
	JobItemDone JobItemOutcome = "done"
	// JobItemSkipped: not acted on: no such failure, or its state changed since the preview.
	JobItemSkipped JobItemOutcome = "skipped"
	// JobItemFailed: attempted and did not succeed.
	JobItemFailed JobItemOutcome = "failed"
)

// Job is a background action on a pinned selection of failures.
type Job struct {
	ID     uuid.UUID
	Action string
	// TargetTopic is where a resend_to job sends the failures; nil for other actions.
	TargetTopic *string
	State       JobState
	Principal   string
	Reason      *string
	// Selection describes how the failures were selected (a filter or ids), for display.
	Selection map[string]any
	// RateLimit is the most items per second the job acts on.
	RateLimit float64
	// Total is the number of pinned items; Done, Skipped and Failed count their outcomes.
	Total, Done, Skipped, Failed int64
	// CursorSeq is the highest item sequence number whose outcome is recorded.
	CursorSeq  int64
	Owner      *string
	LeaseUntil *time.Time
	CreatedAt  time.Time
	// PreviewExpiresAt is when an unstarted preview's token stops working.
	PreviewExpiresAt time.Time
	StartedAt        *time.Time
	FinishedAt       *time.Time
	UpdatedAt        time.Time

	// TargetCluster is the Kafka cluster a resend_to job sends to; nil: each failure's own.
	TargetCluster *string
}

// Remaining is the number of items without an outcome.
func (j *Job) Remaining() int64 { return j.Total - j.Done - j.Skipped - j.Failed }

// JobItem is one pinned failure of a job.
type JobItem struct {
	Seq       int64
	FailureID uuid.UUID
	// Outcome is empty until the item is acted on.
	Outcome JobItemOutcome
	Detail  *string
	DoneAt  *time.Time
}

// Audit log actions of jobs.
const (
	AuditActionJobPreview = "job_preview"
	AuditActionJobStart   = "job_start"
	AuditActionJobPause   = "job_pause"
	AuditActionJobResume  = "job_resume"
	AuditActionJobCancel  = "job_cancel"
)

// JobPosition is a place in the job list: newest first by (created_at, id).
type JobPosition struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// AuditPosition is where a page of audit entries in time order ends: the entry's time and id,
// and for the entry of one item of a job's batch (which shares the batch's time and id with the
// batch's other items), the item's sequence number.
type AuditPosition struct {
	At  time.Time
	ID  int64
	Seq int64
}
