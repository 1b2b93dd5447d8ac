package errorhandler

// Outcome is what became of a record, as the failures counter
// (redrive_errorhandler_failures_total) labels it.
type Outcome string

// The outcomes counted by the failures counter. A record handled without error is not a failure.
const (
	// OutcomeHalted: the partition was halted at the record (policy Fail, or the flood guard).
	OutcomeHalted Outcome = "halted"
	// OutcomeSkipped: the record was dropped (policy Skip, a decode hook, or an operator).
	OutcomeSkipped Outcome = "skipped"
	// OutcomeDeadLettered: the record's MPFE was acknowledged by the error topic.
	OutcomeDeadLettered Outcome = "dead_lettered"
	// OutcomeSubstituted: a decode hook replaced the undecodable value.
	OutcomeSubstituted Outcome = "substituted"
	// OutcomeFiltered: the record was a resend meant for another service.
	OutcomeFiltered Outcome = "filtered"
)
