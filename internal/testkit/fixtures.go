package testkit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/avro"
)

// FailureRow describes a failure for InsertFailure. Zero fields get defaults: state PERMANENT,
// temporality PERMANENT, topic "orders", code DESERIALIZATION_FAILED, publisher shop/order-service,
// message type OrderCreated, a fresh causing message, attempt 1, a short key (unless NullKey),
// a small JSON value, no headers, created now, offset from a counter.
type FailureRow struct {
	State            redrive.State
	Temporality      avro.Temporality
	Topic            string
	Partition        int32
	Offset           int64
	ErrorCode        string
	ErrorMessage     string
	PublisherSystem  string
	PublisherService string
	MessageType      string
	Causing          string
	Attempt          int
	Key              []byte
	NullKey          bool
	Value            []byte
	HeaderNames      []string
	HeaderValues     [][]byte
	CreatedAt        time.Time
	// LeaseUntil, when set, puts the failure in a resend claim of "fixture" that holds it
	// until then.
	LeaseUntil *time.Time
	// ClosedReason is the reason of a CLOSED row. Defaults to "fixture".
	ClosedReason string
	// ParkedHead, when set, links the failure to the head it was parked behind (a causing
	// message, as the intake stores the redrive-parked-head entry of a parked record's MPFE).
	ParkedHead string
}

var fixtureOffset atomic.Int64

// InsertFailure stores r and its group directly with SQL, one statement each, and returns the
// failure's id. It is for tests of the reading and acting side; the intake path is tested with
// real events.
func InsertFailure(t testing.TB, pool *pgxpool.Pool, r FailureRow) uuid.UUID {
	t.Helper()
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	if r.State == "" {
		r.State = redrive.StatePermanent
	}
	if r.Temporality == "" {
		r.Temporality = avro.Permanent
	}
	def(&r.Topic, "orders")
	def(&r.ErrorCode, "DESERIALIZATION_FAILED")
	def(&r.ErrorMessage, "cannot decode record")
	def(&r.PublisherSystem, "shop")
	def(&r.PublisherService, "order-service")
	def(&r.MessageType, "OrderCreated")
	def(&r.ClosedReason, "fixture")
	id := uuid.New()
	def(&r.Causing, "msg-"+id.String())
	if r.Attempt == 0 {
		r.Attempt = 1
	}
	if r.Offset == 0 {
		r.Offset = fixtureOffset.Add(1)
	}
	if r.NullKey {
		r.Key = nil
	} else if r.Key == nil {
		r.Key = []byte("key-" + id.String()[:8])
	}
	if r.Value == nil {
		r.Value = []byte(`{"order":1}`)
	}
	if r.HeaderNames == nil {
		r.HeaderNames, r.HeaderValues = []string{}, [][]byte{}
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	var next *time.Time
	if r.State == redrive.StateRetryPending {
		n := r.CreatedAt.Add(time.Hour)
		next = &n
	}
	var reason *string
	if r.State == redrive.StateClosed {
		reason = &r.ClosedReason
	}
	ctx := context.Background()
	var groupID int64
	err := pool.QueryRow(ctx, `
		INSERT INTO failure_groups (publisher_service, message_type, error_code) VALUES ($1, $2, $3)
		ON CONFLICT (publisher_service, message_type, error_code, stack_trace_hash)
		DO UPDATE SET last_seen = greatest(failure_groups.last_seen, EXCLUDED.last_seen)
		RETURNING id`, r.PublisherService, r.MessageType, r.ErrorCode).Scan(&groupID)
	if err != nil {
		t.Fatalf("testkit: insert group: %v", err)
	}
	_, err = pool.Exec(ctx, `
		INSERT INTO failures (id, state, temporality, error_code, error_message, event_id, idempotence_id,
			event_created, publisher_system, publisher_service, original_topic, original_partition,
			original_offset, original_key, original_value, header_names, header_values, message_type,
			causing_message, attempt, next_attempt_at, closed_reason, group_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
			$20, $21, $22, $23, $24)`,
		id, r.State, r.Temporality, r.ErrorCode, r.ErrorMessage, uuid.NewString(), id.String(),
		r.CreatedAt, r.PublisherSystem, r.PublisherService, r.Topic, r.Partition, r.Offset,
		r.Key, r.Value, r.HeaderNames, r.HeaderValues, r.MessageType, r.Causing, r.Attempt, next,
		reason, groupID, r.CreatedAt)
	if err != nil {
		t.Fatalf("testkit: insert failure: %v", err)
	}
	if r.ParkedHead != "" {
		if _, err := pool.Exec(ctx, `INSERT INTO failure_links (failure_id, created_at, head) VALUES ($1, $2, $3)`,
			id, r.CreatedAt, r.ParkedHead); err != nil {
			t.Fatalf("testkit: insert failure link: %v", err)
		}
	}
	if r.LeaseUntil != nil {
		InsertClaim(t, pool, "fixture", *r.LeaseUntil, id)
	}
	return id
}

// InsertClaim records a resend claim of owner that holds the failures ids until leaseUntil, as
// a resend that is sending them (or that crashed) has, and returns its id.
func InsertClaim(t testing.TB, pool *pgxpool.Pool, owner string, leaseUntil time.Time, ids ...uuid.UUID) int64 {
	t.Helper()
	claimedAt := time.Now()
	if leaseUntil.Before(claimedAt) {
		claimedAt = leaseUntil
	}
	claimedAt = claimedAt.Add(-time.Minute)
	var id int64
	if err := pool.QueryRow(context.Background(), `
		INSERT INTO resend_claims (owner, claimed_at, lease_until, failure_ids) VALUES ($1, $2, $3, $4)
		RETURNING id`, owner, claimedAt, leaseUntil, ids).Scan(&id); err != nil {
		t.Fatalf("testkit: insert claim: %v", err)
	}
	return id
}
