package redrive

import (
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
)

// Audit log actions written by the store on an operator's request.
const (
	// AuditActionClose is the action of closing a failure.
	AuditActionClose = "close"
	// AuditActionGroupUpdate is the action of editing a group's ticket or note.
	AuditActionGroupUpdate = "group_update"
)

// MaxCloseIDs bounds the ids of one CloseFailures call.
const MaxCloseIDs = 1000

// CloseResult is the outcome of closing one failure.
type CloseResult struct {
	ID      uuid.UUID
	Outcome Outcome
	// State is the failure's state before the request; empty when not found.
	State State
	// Detail says why the outcome is not OutcomeClosed; empty otherwise.
	Detail string
}

// AuditActionSessionRevoke is the audit action of an administrator's revocation of a UI
// session; its details name the session and its principal.
const AuditActionSessionRevoke = "session_revoke"

// Revision is an operator's edit of a failure's record, resent instead of the original.
type Revision struct {
	ID          int64
	FailureID   uuid.UUID
	Principal   string
	Reason      string
	TargetTopic string
	Key         []byte // nil for a null key
	Value       []byte // nil for a null value (a tombstone)
	Headers     []avro.Header
	CreatedAt   time.Time
	// Outcome is "resent", "failed" or "conflict" once the resend settled; "" before.
	Outcome      string
	OutcomeError *string
	ResentAt     *time.Time
}

// AuditActionRepair is the audit action of storing a revision.
const AuditActionRepair = "repair"
