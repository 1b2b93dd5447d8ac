package resend

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// testLogger writes slog records to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// env is one test's database and Kafka cluster.
type env struct {
	pool    *pgxpool.Pool
	store   *store.Store
	cluster *testkit.Cluster
	clock   *fakeClock
}

func newEnv(t *testing.T, topics map[string]int) *env {
	t.Helper()
	pool := testkit.Postgres(t)
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	cluster := testkit.Kafka(t)
	for name, partitions := range topics {
		cluster.CreateTopic(t, name, partitions)
	}
	return &env{pool: pool, store: st, cluster: cluster, clock: newClock()}
}

// scheduler returns a Scheduler on the env with test settings; edit adjusts the config. Its
// producer is closed when the test ends, whether Run ran or not.
func (e *env) scheduler(t *testing.T, edit func(*Config)) *Scheduler {
	t.Helper()
	cfg := Config{
		Store:            e.store,
		Brokers:          e.cluster.Bootstrap(),
		ServiceName:      "redrive-test",
		InstanceID:       "instance-" + uuid.NewString()[:8],
		DisableAutomatic: true,
		SendTimeout:      10 * time.Second,
		Housekeeping:     HousekeepingConfig{Disable: true},
		Producer:         kafka.ConfigMap{"log_level": 3},
		Logger:           testLogger(t),
		Registerer:       prometheus.NewRegistry(),
		Now:              e.clock.Now,
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.pub.close)
	return s
}

// row is a failure to insert; zero fields get test defaults.
type row struct {
	State         redrive.State
	Temporality   avro.Temporality
	Topic         string
	Partition     int32
	Offset        int64
	Key           []byte
	Value         []byte
	Headers       []avro.Header
	Service       string
	ErrorCode     string
	Causing       string
	Attempt       int
	NextAttemptAt *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
	ResentAt      *time.Time
	ClosedAt      *time.Time
	// LeaseOwner and LeaseUntil, when both set, put the failure in a resend claim of
	// LeaseOwner that holds it until LeaseUntil.
	LeaseOwner *string
	LeaseUntil *time.Time
	// ParkedHead, when set, links the failure to the head it is parked behind (a causing
	// message), as the intake does for a parked record's MPFE.
	ParkedHead string
}

// insertFailure inserts r (with its group) and returns its id.
func (e *env) insertFailure(t *testing.T, r row) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	if r.State == "" {
		r.State = redrive.StateRetryPending
	}
	if r.Temporality == "" {
		r.Temporality = avro.Temporary
	}
	if r.Topic == "" {
		r.Topic = "orders"
	}
	if r.Value == nil {
		r.Value = []byte("value")
	}
	if r.Service == "" {
		r.Service = "order-service"
	}
	if r.ErrorCode == "" {
		r.ErrorCode = "TIMEOUT"
	}
	if r.Causing == "" {
		r.Causing = "msg-" + uuid.NewString()
	}
	if r.Attempt == 0 {
		r.Attempt = 1
	}
	now := e.clock.Now()
	if r.NextAttemptAt == nil && r.State == redrive.StateRetryPending {
		r.NextAttemptAt = &now
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	var closedReason *string
	if r.State == redrive.StateClosed {
		reason := "dismissed"
		closedReason = &reason
	}
	names := make([]string, len(r.Headers))
	values := make([][]byte, len(r.Headers))
	for i, h := range r.Headers {
		names[i], values[i] = h.Name, h.Value
	}
	var groupID int64
	err := e.pool.QueryRow(ctx, `
		INSERT INTO failure_groups (publisher_service, error_code) VALUES ($1, $2)
		ON CONFLICT ON CONSTRAINT failure_groups_kind_key DO UPDATE SET last_seen = now()
		RETURNING id`, r.Service, r.ErrorCode).Scan(&groupID)
	if err != nil {
		t.Fatalf("insert group: %v", err)
	}
	var id uuid.UUID
	err = e.pool.QueryRow(ctx, `
		INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id,
			event_created, publisher_system, publisher_service, original_topic, original_partition,
			original_offset, original_key, original_value, header_names, header_values, causing_message,
			attempt, next_attempt_at, group_id, created_at, updated_at, resent_at, closed_at, closed_reason)
		VALUES ($1, $2, $3, 'boom', $4, $5, $6, 'shop', $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
			$18, $19, $20, $21, $22, $23)
		RETURNING id`,
		r.State, r.Temporality, r.ErrorCode, uuid.NewString(), uuid.NewString(), r.CreatedAt, r.Service,
		r.Topic, r.Partition, r.Offset, r.Key, r.Value, names, values, r.Causing, r.Attempt, r.NextAttemptAt,
		groupID, r.CreatedAt, r.UpdatedAt, r.ResentAt, r.ClosedAt, closedReason).Scan(&id)
	if err != nil {
		t.Fatalf("insert failure: %v", err)
	}
	if r.ParkedHead != "" {
		if _, err := e.pool.Exec(ctx, `INSERT INTO failure_links (failure_id, created_at, head) VALUES ($1, $2, $3)`,
			id, r.CreatedAt, r.ParkedHead); err != nil {
			t.Fatalf("insert failure link: %v", err)
		}
	}
	if r.LeaseOwner != nil && r.LeaseUntil != nil {
		testkit.InsertClaim(t, e.pool, *r.LeaseOwner, *r.LeaseUntil, id)
	}
	return id
}

// insertDue inserts n RETRY_PENDING failures due now on topic, with causing messages
// "bulk-<i>", keys "key-<i>" and a value of valueSize bytes, in one statement.
func (e *env) insertDue(t testing.TB, topic string, n, valueSize int) {
	t.Helper()
	ctx := context.Background()
	var groupID int64
	if err := e.pool.QueryRow(ctx, `
		INSERT INTO failure_groups (publisher_service, error_code) VALUES ('bulk-service', 'TIMEOUT')
		ON CONFLICT ON CONSTRAINT failure_groups_kind_key DO UPDATE SET last_seen = now()
		RETURNING id`).Scan(&groupID); err != nil {
		t.Fatalf("insert group: %v", err)
	}
	if _, err := e.pool.Exec(ctx, insertDueSQL, n, valueSize, topic, groupID, e.clock.Now()); err != nil {
		t.Fatalf("insert %d failures: %v", n, err)
	}
}

const insertDueSQL = `
	INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id,
		event_created, publisher_system, publisher_service, original_topic, original_partition,
		original_offset, original_key, original_value, header_names, header_values, causing_message,
		attempt, next_attempt_at, group_id, created_at, updated_at)
	SELECT 'RETRY_PENDING', 'TEMPORARY', 'TIMEOUT', 'boom', gen_random_uuid()::text, gen_random_uuid()::text,
		$5, 'shop', 'bulk-service', $3, 0, i, convert_to('key-' || i, 'UTF8'),
		convert_to(rpad('v' || i, $2, 'x'), 'UTF8'),
		ARRAY['trace-id', 'content-type', 'trace-id'],
		ARRAY[convert_to('t' || i, 'UTF8'), convert_to('application/avro', 'UTF8'), convert_to('t2', 'UTF8')],
		'bulk-' || i, 1, $5, $4, $5, $5
	FROM generate_series(1, $1) AS i`

// failureRow is what tests read back of a failure.
type failureRow struct {
	State           redrive.State
	StateReason     *string
	NextAttemptAt   *time.Time
	ResendFailures  int
	LastResendError *string
	ResentAt        *time.Time
	// LeaseOwner is the owner of a resend claim (live or expired) that names the failure.
	LeaseOwner *string
}

func (e *env) failure(t *testing.T, id uuid.UUID) failureRow {
	t.Helper()
	var f failureRow
	err := e.pool.QueryRow(context.Background(), `
		SELECT state, state_reason, next_attempt_at, resend_failures, last_resend_error, resent_at,
			(SELECT c.owner FROM resend_claims c WHERE f.id = ANY(c.failure_ids) ORDER BY c.lease_until DESC LIMIT 1)
		FROM failures f WHERE id = $1`, id).Scan(&f.State, &f.StateReason, &f.NextAttemptAt, &f.ResendFailures,
		&f.LastResendError, &f.ResentAt, &f.LeaseOwner)
	if err != nil {
		t.Fatalf("read failure %s: %v", id, err)
	}
	return f
}

// countState counts the failures in state.
func (e *env) countState(t testing.TB, state redrive.State) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM failures WHERE state = $1`, state).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", state, err)
	}
	return n
}

// records returns how many records topic holds.
func (e *env) records(topic string) int64 {
	var n int64
	for _, end := range e.cluster.EndOffsets(topic) {
		n += end
	}
	return n
}

// headerList renders headers as name=value pairs for comparisons; a null value shows as <nil>.
func headerList(hs []kafka.Header) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		if h.Value == nil {
			parts[i] = h.Key + "=<nil>"
		} else {
			parts[i] = fmt.Sprintf("%s=%q", h.Key, h.Value)
		}
	}
	return strings.Join(parts, " ")
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
