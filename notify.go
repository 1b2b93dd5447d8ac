package redrive

import "time"

// Notification is one event to tell one webhook, with its delivery state.
type Notification struct {
	ID        int64
	Webhook   string
	EventType string
	// DedupeKey names the event; a webhook gets each key once.
	DedupeKey     string
	Payload       map[string]any
	CreatedAt     time.Time
	NextAttemptAt time.Time
	Attempts      int
	DeliveredAt   *time.Time
	GaveUpAt      *time.Time
	LastError     *string
	// Log lists the delivery attempts, when read by ListNotifications.
	Log []NotifyAttempt
}

// Event types of the events outbox: triggers write them in the transaction of the change
// (migration 015), RelayNotifyEvents takes them.
const (
	NotifyEventGroupNew         = "group.new"
	NotifyEventFailureExhausted = "failure.exhausted"
	NotifyEventJobFinished      = "job.finished"
)

// NotifyEvent is one event taken from the events outbox, with what it is about: Group for
// group.new, Failure for failure.exhausted, Job for job.finished; nil when that is gone (deleted
// since).
type NotifyEvent struct {
	ID        int64
	EventType string
	// Subject is the group id, failure id or job id, as text.
	Subject string
	// At is when the change that made the event began.
	At      time.Time
	Group   *Group
	Failure *FailureSummary
	Job     *Job
}

// NotifyAttempt is one delivery attempt.
type NotifyAttempt struct {
	Attempt int
	At      time.Time
	// Status is the HTTP status; 0 when no answer came (Error says why).
	Status   int
	Error    string
	Duration time.Duration
}
