package redrive

import (
	"time"

	"github.com/redrive/redrive/avro"
)

// Stats counts the stored failures.
type Stats struct {
	// Total is the number of failures.
	Total int64
	// ByState has every state, zero when none.
	ByState map[State]int64
	// ByTemporality has every temporality, zero when none.
	ByTemporality map[avro.Temporality]int64
	// ByTopic and ByPublisherService have the topics and services that have failures.
	ByTopic            map[string]int64
	ByPublisherService map[string]int64
	// OldestPending is the created_at of the oldest RETRY_PENDING failure; nil when none.
	OldestPending *time.Time
	// OldestPermanent is the created_at of the oldest PERMANENT failure; nil when none.
	OldestPermanent *time.Time
	// AsOf is when the counts were taken.
	AsOf time.Time
}

// StateReasonRetriesExhausted is the state_reason of a TEMPORARY failure stored as PERMANENT
// because the backoff policy allows no further attempt.
const StateReasonRetriesExhausted = "retries exhausted"

// StateStats are the numbers behind the state metrics.
type StateStats struct {
	// Counts holds the number of failures in every state (zero when none).
	Counts map[State]int64
	// Oldest holds the created_at of the oldest failure per state; a state without failures is
	// absent.
	Oldest map[State]time.Time
}

// OpenBreakdown counts the open failures (RETRY_PENDING or PERMANENT): those that still wait
// for a resend or an operator.
type OpenBreakdown struct {
	Total              int64
	ByTemporality      map[avro.Temporality]int64
	ByTopic            map[string]int64
	ByPublisherService map[string]int64
}

// TimeBucket counts the failures stored in [Start, Start+width).
type TimeBucket struct {
	Start time.Time
	Count int64
}
