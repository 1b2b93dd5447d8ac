package redrive

import (
	"time"
)

// Audit actions of the reactivation of the own dead-letter topic.
const (
	// AuditActionReactivateStart is the action of starting a reactivation.
	AuditActionReactivateStart = "dlt_reactivate_start"
	// AuditActionReactivateEnd records how a reactivation ended, with its counts.
	AuditActionReactivateEnd = "dlt_reactivate_end"
)

// ReactivationState is the state of a reactivation run.
type ReactivationState string

// The states of a reactivation run.
const (
	// ReactivationRunning: the run reads the topic.
	ReactivationRunning ReactivationState = "RUNNING"
	// ReactivationDone: the run read what it was asked to.
	ReactivationDone ReactivationState = "DONE"
	// ReactivationFailed: the run stopped on an error (Reactivation.Error).
	ReactivationFailed ReactivationState = "FAILED"
	// ReactivationInterrupted: the run's service shut down, or stopped sending progress.
	ReactivationInterrupted ReactivationState = "INTERRUPTED"
)

// Reactivation is one run that feeds records of the service's own dead-letter topic back
// through the intake, and its progress.
type Reactivation struct {
	ID    int64
	Topic string
	// Cluster is the Kafka cluster whose dead-letter topic the run reads.
	Cluster   string
	Principal string
	Reason    *string
	// Limit is the most records the run reads; nil for a run up to the end of the topic as it
	// was when the run started (UpToNow).
	Limit   *int64
	UpToNow bool
	State   ReactivationState
	// Read counts the records read; Reingested those stored as new failures; Duplicates those
	// stored before; StillFailing those that still cannot be stored (they stay on the topic).
	Read, Reingested, Duplicates, StillFailing int64
	// Error says why a FAILED run stopped.
	Error      *string
	StartedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// ReactivationStep is the progress of a run since its last step.
type ReactivationStep struct {
	// ID is the run.
	ID int64
	// Read, Reingested, Duplicates and StillFailing are added to the run's counts.
	Read, Reingested, Duplicates, StillFailing int64
	// Positions are the next offsets per partition after the records of the step; a position
	// only moves forward.
	Positions map[int32]int64
}
