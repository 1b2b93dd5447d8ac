package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/internal/testkit/storekit"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/resend"
	"go.opentelemetry.io/otel/trace"
)

// Tokens of the test server, one per role.
const (
	viewerToken   = "viewer-token-0123456789"
	operatorToken = "operator-token-0123456789"
	adminToken    = "admin-token-0123456789"
	// noPayloadToken is a viewer without the payload permission.
	noPayloadToken = "nopayload-token-0123456789"
)

// env is an API handler on a fresh database, with a real resender over an in-process Kafka.
type env struct {
	t       *testing.T
	pool    *pgxpool.Pool
	store   *storekit.Store
	handler http.Handler
	core    *operator.Core
	auth    *auth.Authenticator
	cluster *testkit.Cluster
	// stopResender stops the resend scheduler (retries then answer 503); nil without one.
	stopResender func()
	// resender is the scheduler's resender; nil without one.
	resender *resend.Resender
}

// setup is what a test may change before the handler is built.
type setup struct {
	Core operator.Config
	API  api.Config
	Auth auth.Config
	// NoResender builds the core without a resender.
	NoResender bool
	// ResendTracer traces the resender's sends.
	ResendTracer trace.TracerProvider
}

// failingTopic is a topic whose produce requests always fail: a failure stored with it as its
// original topic cannot be resent.
const failingTopic = "failing"

func testTokens(t testing.TB) []auth.Token {
	t.Helper()
	tokens, err := auth.ParseTokens("vera:viewer+payload:" + viewerToken + ",otto:operator+payload:" + operatorToken +
		"\nada:admin:" + auth.HashToken(adminToken) + ",nina:viewer:" + noPayloadToken)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// newEnv returns a handler with bearer tokens for each role and a real resender; mod may
// change the setup first.
func newEnv(t *testing.T, mod func(*setup)) *env {
	t.Helper()
	pool := testkit.Postgres(t)
	s := storekit.New(t, pool)
	e := &env{t: t, pool: pool, store: s}
	su := setup{
		Core: operator.Config{Store: s, StatsMaxAge: time.Nanosecond},
		Auth: auth.Config{Tokens: testTokens(t)},
	}
	if mod != nil {
		mod(&su)
	}
	if !su.NoResender && su.Core.Resender == nil {
		su.Core.Resender = e.startResender(s, su.ResendTracer)
	}
	core, err := operator.New(su.Core)
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.NewAuthenticator(su.Auth)
	if err != nil {
		t.Fatal(err)
	}
	su.API.Core, su.API.Auth = core, authn
	e.core, e.auth = core, authn
	h, err := api.New(su.API)
	if err != nil {
		t.Fatal(err)
	}
	e.handler = h
	return e
}

// startResender runs a resend scheduler (no automatic rounds) over a fresh in-process Kafka
// with the topics "orders" and failingTopic, whose produce requests always fail.
func (e *env) startResender(s *storekit.Store, tp trace.TracerProvider) *resend.Resender {
	t := e.t
	e.cluster = testkit.Kafka(t)
	e.cluster.CreateTopic(t, "orders", 1)
	e.cluster.CreateTopic(t, failingTopic, 1)
	e.cluster.FailProduce(failingTopic, 0)
	sched, err := resend.New(resend.Config{
		Store: s, Brokers: e.cluster.Bootstrap(), ServiceName: "redrive-api-test",
		DisableAutomatic: true, Housekeeping: resend.HousekeepingConfig{Disable: true}, SendTimeout: 2 * time.Second,
		Producer: kafka.ConfigMap{"log_level": 3}, Registerer: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TracerProvider: tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	var once sync.Once
	e.stopResender = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(e.stopResender)
	e.resender = sched.Resender()
	return e.resender
}

// response is a recorded response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r *response) problem(t testing.TB) api.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d with Content-Type %q, want application/problem+json: %s", r.status, ct, r.body)
	}
	var p api.Problem
	r.json(t, &p)
	if p.Status != r.status || p.Title == "" {
		t.Fatalf("problem %+v does not match status %d", p, r.status)
	}
	return p
}

// do sends a request with token (none when ""); a string body is sent as JSON.
func (e *env) do(method, path, token string, body any) *response {
	e.t.Helper()
	return doRequest(e.t, e.handler, method, path, token, body, nil)
}

func doRequest(t testing.TB, h http.Handler, method, path, token string, body any, mod func(*http.Request)) *response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if mod != nil {
		mod(req)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return &response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// row describes a failure row; zero fields get defaults.
// row describes a failure to insert; see testkit.FailureRow for the defaults.
type row = testkit.FailureRow

// insert stores r (and its group) and returns its id. API tests expect the original record at
// partition 2, offset 42, and a CLOSED row closed "closed before".
func (e *env) insert(r row) uuid.UUID {
	e.t.Helper()
	if r.Partition == 0 {
		r.Partition = 2
	}
	if r.Offset == 0 {
		r.Offset = 42
	}
	if r.ClosedReason == "" {
		r.ClosedReason = "closed before"
	}
	return testkit.InsertFailure(e.t, e.pool, r)
}

// seed inserts n failures in one statement, created one per millisecond from base in
// batches of three sharing a created_at (so ties are broken by id), cycling through states
// and topics.
func (e *env) seed(n int, base time.Time) {
	e.t.Helper()
	ctx := context.Background()
	var groupID int64
	if err := e.pool.QueryRow(ctx, `
		INSERT INTO failure_groups (publisher_service, message_type, error_code) VALUES ('seed', 'Seed', 'SEED')
		ON CONFLICT (publisher_service, message_type, error_code, stack_trace_hash) DO UPDATE SET note = failure_groups.note
		RETURNING id`).Scan(&groupID); err != nil {
		e.t.Fatal(err)
	}
	_, err := e.pool.Exec(ctx, `
		INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id,
			event_created, publisher_system, publisher_service, original_topic, original_partition,
			original_offset, original_value, causing_message, group_id, created_at, closed_reason)
		SELECT (ARRAY['PERMANENT','RESENT','CLOSED'])[1 + i % 3], 'PERMANENT', 'SEED', 'seeded ' || i,
			gen_random_uuid()::text, gen_random_uuid()::text, $2::timestamptz, 'seed', 'seed', 'seed-' || (i % 4), 0, i,
			'\x00'::bytea, 'seed-' || i, $3, $2::timestamptz + (i / 3) * interval '1 millisecond',
			CASE WHEN i % 3 = 2 THEN 'seed' END
		FROM generate_series(1, $1) AS i`, n, base, groupID)
	if err != nil {
		e.t.Fatal(err)
	}
}

// checksum sums up everything an API request could change.
func (e *env) checksum() string {
	e.t.Helper()
	var sum string
	err := e.pool.QueryRow(context.Background(), `
		SELECT coalesce((SELECT md5(string_agg(id::text || state || coalesce(closed_reason, '') || coalesce(closed_by, '') ||
			updated_at::text, ',' ORDER BY id)) FROM failures), '') ||
		       coalesce((SELECT md5(string_agg(id::text || coalesce(ticket, '') || coalesce(note, '') || updated_at::text, ',' ORDER BY id))
			FROM failure_groups), '') ||
		       (SELECT count(*) FROM audit_log)::text`).Scan(&sum)
	if err != nil {
		e.t.Fatal(err)
	}
	return sum
}

func (e *env) state(id uuid.UUID) redrive.State {
	e.t.Helper()
	var s redrive.State
	if err := e.pool.QueryRow(context.Background(), "SELECT state FROM failures WHERE id = $1", id).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	return s
}
