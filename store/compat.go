package store

// The domain names below moved to package redrive, the domain leaf at the module root. They
// stay here as aliases of the same types and values (errors.Is and type switches see no
// difference), so that code written against store keeps compiling; new code uses redrive.

import "github.com/redrive/redrive"

// Deprecated: use redrive.AuditActionClose.
const AuditActionClose = redrive.AuditActionClose

// Deprecated: use redrive.AuditActionGroupUpdate.
const AuditActionGroupUpdate = redrive.AuditActionGroupUpdate

// Deprecated: use redrive.AuditActionJobCancel.
const AuditActionJobCancel = redrive.AuditActionJobCancel

// Deprecated: use redrive.AuditActionJobPause.
const AuditActionJobPause = redrive.AuditActionJobPause

// Deprecated: use redrive.AuditActionJobPreview.
const AuditActionJobPreview = redrive.AuditActionJobPreview

// Deprecated: use redrive.AuditActionJobResume.
const AuditActionJobResume = redrive.AuditActionJobResume

// Deprecated: use redrive.AuditActionJobStart.
const AuditActionJobStart = redrive.AuditActionJobStart

// Deprecated: use redrive.AuditActionReactivateEnd.
const AuditActionReactivateEnd = redrive.AuditActionReactivateEnd

// Deprecated: use redrive.AuditActionReactivateStart.
const AuditActionReactivateStart = redrive.AuditActionReactivateStart

// Deprecated: use redrive.AuditActionRepair.
const AuditActionRepair = redrive.AuditActionRepair

// Deprecated: use redrive.AuditActionSessionRevoke.
const AuditActionSessionRevoke = redrive.AuditActionSessionRevoke

// Deprecated: use redrive.AuditEntry.
type AuditEntry = redrive.AuditEntry

// Deprecated: use redrive.AuditPosition.
type AuditPosition = redrive.AuditPosition

// Deprecated: use redrive.BadDataError.
type BadDataError = redrive.BadDataError

// Deprecated: use redrive.CausingMessage.
var CausingMessage = redrive.CausingMessage

// Deprecated: use redrive.OutcomeClosed.
const CloseClosed = redrive.OutcomeClosed

// Deprecated: use redrive.OutcomeConflict.
const CloseConflict = redrive.OutcomeConflict

// Deprecated: use redrive.OutcomeNotFound.
const CloseNotFound = redrive.OutcomeNotFound

// Deprecated: use redrive.Outcome.
type CloseOutcome = redrive.Outcome

// Deprecated: use redrive.CloseResult.
type CloseResult = redrive.CloseResult

// Deprecated: use redrive.ErrBadData.
var ErrBadData = redrive.ErrBadData

// Deprecated: use redrive.ErrBadFilter.
var ErrBadFilter = redrive.ErrBadFilter

// Deprecated: use redrive.ErrClaimSettled.
var ErrClaimSettled = redrive.ErrClaimSettled

// Deprecated: use redrive.ErrConflict.
var ErrConflict = redrive.ErrConflict

// Deprecated: use redrive.ErrLeaseLost.
var ErrLeaseLost = redrive.ErrLeaseLost

// Deprecated: use redrive.ErrNotFound.
var ErrNotFound = redrive.ErrNotFound

// Deprecated: use redrive.ErrReactivationRunning.
var ErrReactivationRunning = redrive.ErrReactivationRunning

// Deprecated: use redrive.ErrTokenRefused.
var ErrTokenRefused = redrive.ErrTokenRefused

// Deprecated: use redrive.ErrTooBroad.
var ErrTooBroad = redrive.ErrTooBroad

// Deprecated: use redrive.Failure.
type Failure = redrive.Failure

// Deprecated: use redrive.FailureDetail.
type FailureDetail = redrive.FailureDetail

// Deprecated: use redrive.FailureSummary.
type FailureSummary = redrive.FailureSummary

// Deprecated: use redrive.Filter.
type Filter = redrive.Filter

// Deprecated: use redrive.FilterError.
type FilterError = redrive.FilterError

// Deprecated: use redrive.Group.
type Group = redrive.Group

// Deprecated: use redrive.GroupFilter.
type GroupFilter = redrive.GroupFilter

// Deprecated: use redrive.GroupKind.
type GroupKind = redrive.GroupKind

// Deprecated: use redrive.GroupPatch.
type GroupPatch = redrive.GroupPatch

// Deprecated: use redrive.GroupPosition.
type GroupPosition = redrive.GroupPosition

// Deprecated: use redrive.GroupSearch.
type GroupSearch = redrive.GroupSearch

// Deprecated: use redrive.GroupSummary.
type GroupSummary = redrive.GroupSummary

// Deprecated: use redrive.Job.
type Job = redrive.Job

// Deprecated: use redrive.JobCanceled.
const JobCanceled = redrive.JobCanceled

// Deprecated: use redrive.JobDone.
const JobDone = redrive.JobDone

// Deprecated: use redrive.JobItem.
type JobItem = redrive.JobItem

// Deprecated: use redrive.JobItemDone.
const JobItemDone = redrive.JobItemDone

// Deprecated: use redrive.JobItemFailed.
const JobItemFailed = redrive.JobItemFailed

// Deprecated: use redrive.JobItemOutcome.
type JobItemOutcome = redrive.JobItemOutcome

// Deprecated: use redrive.JobItemSkipped.
const JobItemSkipped = redrive.JobItemSkipped

// Deprecated: use redrive.JobPaused.
const JobPaused = redrive.JobPaused

// Deprecated: use redrive.JobPosition.
type JobPosition = redrive.JobPosition

// Deprecated: use redrive.JobPreview.
const JobPreview = redrive.JobPreview

// Deprecated: use redrive.JobRunning.
const JobRunning = redrive.JobRunning

// Deprecated: use redrive.JobState.
type JobState = redrive.JobState

// Deprecated: use redrive.JobStateError.
type JobStateError = redrive.JobStateError

// Deprecated: use redrive.MaxCloseIDs.
const MaxCloseIDs = redrive.MaxCloseIDs

// Deprecated: use redrive.MaxGroupKey.
const MaxGroupKey = redrive.MaxGroupKey

// Deprecated: use redrive.MaxKeyPrefix.
const MaxKeyPrefix = redrive.MaxKeyPrefix

// Deprecated: use redrive.MaxKeyText.
const MaxKeyText = redrive.MaxKeyText

// Deprecated: use redrive.MaxListLimit.
const MaxListLimit = redrive.MaxListLimit

// Deprecated: use redrive.MaxNoteLen.
const MaxNoteLen = redrive.MaxNoteLen

// Deprecated: use redrive.MaxParkedChain.
const MaxParkedChain = redrive.MaxParkedChain

// Deprecated: use redrive.MaxPayloadSearch.
const MaxPayloadSearch = redrive.MaxPayloadSearch

// Deprecated: use redrive.MaxPayloadSpan.
const MaxPayloadSpan = redrive.MaxPayloadSpan

// Deprecated: use redrive.MaxSearchLen.
const MaxSearchLen = redrive.MaxSearchLen

// Deprecated: use redrive.MaxTicketLen.
const MaxTicketLen = redrive.MaxTicketLen

// Deprecated: use redrive.MinPayloadSearch.
const MinPayloadSearch = redrive.MinPayloadSearch

// Deprecated: use redrive.NewestFirst.
const NewestFirst = redrive.NewestFirst

// Deprecated: use redrive.Notification.
type Notification = redrive.Notification

// Deprecated: use redrive.NotifyAttempt.
type NotifyAttempt = redrive.NotifyAttempt

// Deprecated: use redrive.NotifyEvent.
type NotifyEvent = redrive.NotifyEvent

// Deprecated: use redrive.NotifyEventFailureExhausted.
const NotifyEventFailureExhausted = redrive.NotifyEventFailureExhausted

// Deprecated: use redrive.NotifyEventGroupNew.
const NotifyEventGroupNew = redrive.NotifyEventGroupNew

// Deprecated: use redrive.NotifyEventJobFinished.
const NotifyEventJobFinished = redrive.NotifyEventJobFinished

// Deprecated: use redrive.OldestFirst.
const OldestFirst = redrive.OldestFirst

// Deprecated: use redrive.OpenBreakdown.
type OpenBreakdown = redrive.OpenBreakdown

// Deprecated: use redrive.Order.
type Order = redrive.Order

// Deprecated: use redrive.ParkedChain.
type ParkedChain = redrive.ParkedChain

// Deprecated: use redrive.ParkedLink.
type ParkedLink = redrive.ParkedLink

// Deprecated: use redrive.PayloadTimeout.
const PayloadTimeout = redrive.PayloadTimeout

// Deprecated: use redrive.Position.
type Position = redrive.Position

// Deprecated: use redrive.Reactivation.
type Reactivation = redrive.Reactivation

// Deprecated: use redrive.ReactivationDone.
const ReactivationDone = redrive.ReactivationDone

// Deprecated: use redrive.ReactivationFailed.
const ReactivationFailed = redrive.ReactivationFailed

// Deprecated: use redrive.ReactivationInterrupted.
const ReactivationInterrupted = redrive.ReactivationInterrupted

// Deprecated: use redrive.ReactivationRunning.
const ReactivationRunning = redrive.ReactivationRunning

// Deprecated: use redrive.ReactivationState.
type ReactivationState = redrive.ReactivationState

// Deprecated: use redrive.ReactivationStep.
type ReactivationStep = redrive.ReactivationStep

// Deprecated: use redrive.Revision.
type Revision = redrive.Revision

// Deprecated: use redrive.Source.
type Source = redrive.Source

// Deprecated: use redrive.SourceConnect.
const SourceConnect = redrive.SourceConnect

// Deprecated: use redrive.SourceFormat.
type SourceFormat = redrive.SourceFormat

// Deprecated: use redrive.SourceFormats.
var SourceFormats = redrive.SourceFormats

// Deprecated: use redrive.SourceMPFE.
const SourceMPFE = redrive.SourceMPFE

// Deprecated: use redrive.SourceRaw.
const SourceRaw = redrive.SourceRaw

// Deprecated: use redrive.SourceSpring.
const SourceSpring = redrive.SourceSpring

// Deprecated: use redrive.SourceStreams.
const SourceStreams = redrive.SourceStreams

// Deprecated: use redrive.State.
type State = redrive.State

// Deprecated: use redrive.StateClosed.
const StateClosed = redrive.StateClosed

// Deprecated: use redrive.StatePermanent.
const StatePermanent = redrive.StatePermanent

// Deprecated: use redrive.StateReasonRetriesExhausted.
const StateReasonRetriesExhausted = redrive.StateReasonRetriesExhausted

// Deprecated: use redrive.StateResent.
const StateResent = redrive.StateResent

// Deprecated: use redrive.StateRetryPending.
const StateRetryPending = redrive.StateRetryPending

// Deprecated: use redrive.StateStats.
type StateStats = redrive.StateStats

// Deprecated: use redrive.States.
var States = redrive.States

// Deprecated: use redrive.Stats.
type Stats = redrive.Stats

// Deprecated: use redrive.TimeBucket.
type TimeBucket = redrive.TimeBucket

// Deprecated: use redrive.TopicPartitionOffset.
var TopicPartitionOffset = redrive.TopicPartitionOffset

// Deprecated: use redrive.TransitionError.
type TransitionError = redrive.TransitionError

// Deprecated: use redrive.UnknownPosition.
const UnknownPosition = redrive.UnknownPosition
