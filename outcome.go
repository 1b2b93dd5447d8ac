package redrive

// Outcome is what became of one failure that an action was asked to act on: a resend
// (manual, automatic or a job's), a close, or any operator action. It is the one outcome
// vocabulary of the store, the resender, the operator core, the API, the UI and the audit
// log. A job counts its items' outcomes as done, skipped or failed (JobItemOutcome).
type Outcome string

// The outcomes.
const (
	// OutcomeResent: the original was republished (the broker acknowledged it) and the
	// failure is RESENT.
	OutcomeResent Outcome = "resent"
	// OutcomeClosed: the failure is CLOSED.
	OutcomeClosed Outcome = "closed"
	// OutcomeNotFound: no failure has the id.
	OutcomeNotFound Outcome = "not_found"
	// OutcomeConflict: the failure's state does not allow the action (it is neither
	// RETRY_PENDING nor PERMANENT), or a resend of it is in progress; it is unchanged.
	OutcomeConflict Outcome = "conflict"
	// OutcomeFailed: the action was attempted and did not succeed (e.g. the broker did not
	// acknowledge the resend, or its outcome was not recorded); the failure keeps its state,
	// and a RETRY_PENDING one is due again later.
	OutcomeFailed Outcome = "failed"
	// OutcomeExhausted: the scheduler moved the failure to PERMANENT because its retries are
	// exhausted, without sending it.
	OutcomeExhausted Outcome = "exhausted"
)

// Outcomes lists every outcome.
var Outcomes = []Outcome{OutcomeResent, OutcomeClosed, OutcomeNotFound, OutcomeConflict, OutcomeFailed, OutcomeExhausted}

// Valid reports whether o is one of the outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeResent, OutcomeClosed, OutcomeNotFound, OutcomeConflict, OutcomeFailed, OutcomeExhausted:
		return true
	}
	return false
}
