package errorhandler

import (
	"errors"
	"time"
)

// Action is what an operator does with a halted partition's record when releasing it.
type Action string

// The release actions.
const (
	// ActionSkip drops the halted record and resumes the partition after it.
	ActionSkip Action = "skip"
	// ActionDeadLetter publishes the halted record's MPFE and resumes the partition after it;
	// the record is committed when the MPFE is acknowledged.
	ActionDeadLetter Action = "dead-letter"
)

// Errors of a Runner's Release.
var (
	ErrNotRunning   = errors.New("the runner is not running")
	ErrNotAssigned  = errors.New("the partition is not assigned to this consumer")
	ErrNotHalted    = errors.New("the partition is not halted")
	ErrWrongOffset  = errors.New("the partition is halted at another offset")
	ErrNoErrorTopic = errors.New("no error topic is configured")
	ErrBadAction    = errors.New("unknown action: want skip or dead-letter")
)

// ErrClosed is returned for MPFEs submitted to a DeadLetterer that is closing.
var ErrClosed = errors.New("dead-letterer is closed")

// Halt reasons.
const (
	// ReasonFailure: a record failed under the Fail policy.
	ReasonFailure = "failure"
	// ReasonFlood: the flood guard saw too many failures in a row.
	ReasonFlood = "flood"
)

// Health is a snapshot of a Runner's state.
type Health struct {
	// Status is "ok" or "degraded".
	Status string `json:"status"`
	// Reason says why the status is degraded.
	Reason string `json:"reason,omitempty"`
	// Halted lists the halted partitions.
	Halted []HaltedPartition `json:"halted"`
	// Waiting lists the partitions paused because the error topic cannot be written.
	Waiting []WaitingPartition `json:"waiting"`
	// DeadLetter describes the MPFE producer; nil without an error topic.
	DeadLetter *DeadLetterHealth `json:"dead_letter,omitempty"`
}

// HaltedPartition is a partition halted at a record.
type HaltedPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the halted record's offset: nothing at or after it is committed.
	Offset int64 `json:"offset"`
	// Phase is the phase the record failed in: decode or process.
	Phase Phase `json:"phase"`
	// Reason is "failure" (the Fail policy), "flood" (the flood guard) or "ordering-limit" (the
	// ordering guard is full, see Ordering.AtLimit).
	Reason string `json:"reason"`
	// Code is the failure's error code.
	Code string `json:"code"`
	// Error is the failure's error text.
	Error string    `json:"error"`
	Since time.Time `json:"since"`
}

// WaitingPartition is a partition paused until an MPFE of one of its records gets through.
type WaitingPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the first record whose MPFE has not been acknowledged.
	Offset int64     `json:"offset"`
	Phase  Phase     `json:"phase"`
	Error  string    `json:"error"`
	Since  time.Time `json:"since"`
}

// DeadLetterHealth describes a dead-letter producer.
type DeadLetterHealth struct {
	// ErrorTopic is where MPFEs go.
	ErrorTopic string `json:"error_topic"`
	// InFlight counts MPFEs not yet acknowledged.
	InFlight int `json:"in_flight"`
	// Retrying counts MPFEs whose last attempt failed.
	Retrying int `json:"retrying"`
	// LastError is the last produce error and when it happened.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}
