package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
)

type bulkView struct {
	Action  string         `json:"action"`
	DryRun  bool           `json:"dry_run"`
	Matched int            `json:"matched"`
	Counts  map[string]int `json:"counts"`
	Errors  []struct {
		ID      uuid.UUID `json:"id"`
		Outcome string    `json:"outcome"`
		Before  *string   `json:"state_before"`
		After   *string   `json:"state_after"`
		Detail  string    `json:"detail"`
	} `json:"errors"`
}

func (e *env) audit(action string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_log WHERE action = $1", action).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func TestRetryAndCloseOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	pending := e.insert(row{State: redrive.StateRetryPending})
	permanent := e.insert(row{})
	closed := e.insert(row{State: redrive.StateClosed})
	failing := e.insert(row{Topic: failingTopic})

	r := e.do("POST", "/api/v1/failures/"+pending.String()+"/retry", operatorToken, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"outcome":"resent"`) || e.state(pending) != redrive.StateResent {
		t.Errorf("retry = %d %s, state %s", r.status, r.body, e.state(pending))
	}
	r = e.do("POST", "/api/v1/failures/"+pending.String()+"/retry", operatorToken, map[string]string{"reason": "again"})
	if p := r.problem(t); r.status != 409 || !strings.Contains(p.Detail, "RESENT") {
		t.Errorf("retry RESENT = %d %+v", r.status, p)
	}
	if r = e.do("POST", "/api/v1/failures/"+closed.String()+"/retry", adminToken, nil); r.status != 409 {
		t.Errorf("retry CLOSED = %d %s", r.status, r.body)
	}
	if r = e.do("POST", "/api/v1/failures/"+uuid.NewString()+"/retry", operatorToken, nil); r.status != 404 {
		t.Errorf("retry unknown = %d %s", r.status, r.body)
	}
	if r = e.do("POST", "/api/v1/failures/"+failing.String()+"/retry", operatorToken, nil); r.status != 502 || e.state(failing) != redrive.StatePermanent {
		t.Errorf("failing retry = %d %s", r.status, r.body)
	}

	r = e.do("POST", "/api/v1/failures/"+permanent.String()+"/close", operatorToken, map[string]string{"reason": "  duplicate of OPS-1  "})
	if r.status != 200 || e.state(permanent) != redrive.StateClosed {
		t.Fatalf("close = %d %s", r.status, r.body)
	}
	var by, reason string
	if err := e.pool.QueryRow(context.Background(), "SELECT closed_by, closed_reason FROM failures WHERE id = $1", permanent).Scan(&by, &reason); err != nil || by != "token:otto" || reason != "duplicate of OPS-1" {
		t.Errorf("closed_by %q reason %q (%v)", by, reason, err)
	}
	if r = e.do("POST", "/api/v1/failures/"+permanent.String()+"/close", operatorToken, map[string]string{"reason": "x"}); r.status != 409 {
		t.Errorf("close CLOSED = %d", r.status)
	}
	if r = e.do("POST", "/api/v1/failures/"+pending.String()+"/close", operatorToken, map[string]string{"reason": "x"}); r.status != 409 {
		t.Errorf("close RESENT = %d", r.status)
	}
	if r = e.do("POST", "/api/v1/failures/"+uuid.NewString()+"/close", operatorToken, map[string]string{"reason": "x"}); r.status != 404 {
		t.Errorf("close unknown = %d", r.status)
	}
	if n := e.audit("close"); n != 1 {
		t.Errorf("%d close audit entries, want 1", n)
	}
	if n := e.audit("retry"); n != 2 {
		t.Errorf("%d retry audit entries, want 2 (one per attempted resend; refusals write none)", n)
	}
}

func TestBulkByIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	a, b := e.insert(row{}), e.insert(row{State: redrive.StateRetryPending})
	resent := e.insert(row{State: redrive.StateResent})
	missing := uuid.New()
	failing := e.insert(row{Topic: failingTopic})
	list := []string{a.String(), b.String(), resent.String(), missing.String(), a.String(), failing.String()}

	// A dry run reports what would happen and changes nothing.
	before := e.checksum()
	r := e.do("POST", "/api/v1/failures/close", operatorToken, map[string]any{"ids": list, "reason": "r", "dry_run": true})
	var v bulkView
	r.json(t, &v)
	if r.status != 200 || !v.DryRun || v.Matched != 5 || v.Counts["closed"] != 3 || v.Counts["conflict"] != 1 || v.Counts["not_found"] != 1 || len(v.Errors) != 2 {
		t.Errorf("dry run = %d %+v", r.status, v)
	}
	if e.checksum() != before {
		t.Error("a dry run changed the database")
	}

	r = e.do("POST", "/api/v1/failures/retry", operatorToken, map[string]any{"ids": list, "reason": "deploy fixed it"})
	v = bulkView{}
	r.json(t, &v)
	if r.status != http.StatusMultiStatus || v.Action != "retry" || v.Matched != 5 ||
		v.Counts["resent"] != 2 || v.Counts["conflict"] != 1 || v.Counts["not_found"] != 1 || v.Counts["failed"] != 1 || len(v.Errors) != 3 {
		t.Fatalf("bulk retry = %d %+v", r.status, v)
	}
	outcomes := map[uuid.UUID]string{}
	for _, it := range v.Errors {
		outcomes[it.ID] = it.Outcome
	}
	if outcomes[resent] != "conflict" || outcomes[missing] != "not_found" || outcomes[failing] != "failed" || v.Errors[0].Detail == "" {
		t.Errorf("errors = %+v", v.Errors)
	}
	if e.state(a) != redrive.StateResent || e.state(b) != redrive.StateResent || e.state(failing) != redrive.StatePermanent {
		t.Error("states after the bulk retry are wrong")
	}
	// Everything succeeds: 200.
	c, d := e.insert(row{}), e.insert(row{})
	r = e.do("POST", "/api/v1/failures/close", operatorToken, map[string]any{"ids": []string{c.String(), d.String()}, "reason": "noise"})
	v = bulkView{}
	r.json(t, &v)
	if r.status != 200 || v.Counts["closed"] != 2 || len(v.Errors) != 0 {
		t.Errorf("bulk close = %d %+v", r.status, v)
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(DISTINCT details->>'bulk_id') FROM audit_log
		WHERE action = 'close' AND principal = 'token:otto' AND reason = 'noise' AND failure_id = ANY($1)`, []uuid.UUID{c, d}).Scan(&n); err != nil || n != 1 {
		t.Errorf("bulk close audit: %d bulk ids (%v), want 1", n, err)
	}
}

func TestBulkByFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *setup) { s.Core.MaxBulk = 5 })
	var hit []uuid.UUID
	for range 4 {
		hit = append(hit, e.insert(row{Topic: "billing", ErrorMessage: "timeout"}))
	}
	e.insert(row{Topic: "billing", State: redrive.StateResent})
	other := e.insert(row{Topic: "shipping"})

	filter := map[string]any{"topic": "billing"}
	r := e.do("POST", "/api/v1/failures/close", operatorToken, map[string]any{"filter": filter, "dry_run": true})
	var v bulkView
	r.json(t, &v)
	if r.status != 200 || v.Matched != 4 || v.Counts["closed"] != 4 {
		t.Errorf("filter dry run = %d %+v", r.status, v)
	}
	r = e.do("POST", "/api/v1/failures/close", operatorToken, map[string]any{"filter": map[string]any{"topic": "billing", "q": "TIME", "state": []string{"PERMANENT"}}, "reason": "billing outage"})
	v = bulkView{}
	r.json(t, &v)
	if r.status != 200 || v.Matched != 4 || v.Counts["closed"] != 4 || len(v.Errors) != 0 {
		t.Fatalf("filter close = %d %+v", r.status, v)
	}
	for _, id := range hit {
		if e.state(id) != redrive.StateClosed {
			t.Errorf("%s not closed", id)
		}
	}
	if e.state(other) != redrive.StatePermanent {
		t.Error("a failure outside the filter was closed")
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'close'
		AND details->'filter'->>'topic' = 'billing' AND details->>'bulk_id' IS NOT NULL`).Scan(&n); err != nil || n != 4 {
		t.Errorf("filter close audit entries = %d (%v), want 4", n, err)
	}

	// Over the bulk limit: 422, nothing done; a dry run still counts.
	for range 6 {
		e.insert(row{Topic: "search"})
	}
	before := e.checksum()
	r = e.do("POST", "/api/v1/failures/retry", operatorToken, map[string]any{"filter": map[string]any{"topic": "search"}})
	if p := r.problem(t); r.status != 422 || p.Field != "filter" {
		t.Errorf("over the limit = %d %+v", r.status, p)
	}
	if e.checksum() != before {
		t.Error("a refused bulk action changed something")
	}
	r = e.do("POST", "/api/v1/failures/retry", operatorToken, map[string]any{"filter": map[string]any{"topic": "search"}, "dry_run": true})
	v = bulkView{}
	r.json(t, &v)
	if r.status != 200 || v.Matched != 6 || v.Counts["resent"] != 6 {
		t.Errorf("dry run over the limit = %d %+v", r.status, v)
	}
	r = e.do("POST", "/api/v1/failures/retry", operatorToken, map[string]any{"filter": map[string]any{"topic": "search", "created_to": "2999-01-01T00:00:00Z", "temporality": "PERMANENT"}, "dry_run": false})
	if r.status != 422 {
		t.Errorf("retry over the limit = %d", r.status)
	}
}

func TestRetryUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	a := e.insert(row{})
	// Once the resender is shut down, retries answer 503 and change nothing.
	e.stopResender()
	before := e.checksum()
	r := e.do("POST", "/api/v1/failures/retry", operatorToken, map[string]any{"ids": []string{a.String()}})
	if p := r.problem(t); r.status != 503 || !strings.Contains(p.Detail, "shutting down") {
		t.Errorf("bulk retry after shutdown = %d %+v", r.status, p)
	}
	if r = e.do("POST", "/api/v1/failures/"+a.String()+"/retry", operatorToken, nil); r.status != 503 {
		t.Errorf("single retry after shutdown = %d %s", r.status, r.body)
	}
	if e.checksum() != before {
		t.Error("a refused retry changed something")
	}
	// Without a resender, retry answers 503 (a dry run still works).
	e2 := newEnv(t, func(s *setup) { s.NoResender = true })
	b := e2.insert(row{})
	if r = e2.do("POST", "/api/v1/failures/"+b.String()+"/retry", operatorToken, nil); r.status != 503 {
		t.Errorf("retry without resender = %d", r.status)
	}
	if r = e2.do("POST", "/api/v1/failures/retry", operatorToken, map[string]any{"ids": []string{b.String()}, "dry_run": true}); r.status != 200 {
		t.Errorf("dry run without resender = %d %s", r.status, r.body)
	}
}

// The answer to a single retry names the state before and after.
func TestSingleRetryNamesStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.insert(row{})
	r := e.do("POST", "/api/v1/failures/"+id.String()+"/retry", operatorToken, nil)
	var got struct {
		Outcome string `json:"outcome"`
		Before  string `json:"state_before"`
		After   string `json:"state_after"`
	}
	r.json(t, &got)
	if r.status != 200 || got.Outcome != "resent" || got.Before != "PERMANENT" || got.After != "RESENT" {
		t.Errorf("single retry = %d %s", r.status, r.body)
	}
}

// Refused actions write no audit entry, for retry and close alike; attempts do.
func TestAuditOnlyWhatHappened(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	resent := e.insert(row{State: redrive.StateResent})
	var ids []string
	for range 50 {
		ids = append(ids, uuid.NewString())
	}
	ids = append(ids, resent.String())
	for _, act := range []string{"retry", "close"} {
		r := e.do("POST", "/api/v1/failures/"+act, operatorToken, map[string]any{"ids": ids, "reason": "junk"})
		if r.status != http.StatusMultiStatus {
			t.Errorf("%s of unknown ids = %d %s", act, r.status, r.body)
		}
		if n := e.audit(act); n != 0 {
			t.Errorf("%s of unknown and conflicting ids wrote %d audit entries, want none", act, n)
		}
	}
	failing := e.insert(row{Topic: failingTopic})
	if r := e.do("POST", "/api/v1/failures/"+failing.String()+"/retry", operatorToken, nil); r.status != 502 {
		t.Errorf("failing retry = %d %s", r.status, r.body)
	}
	if n := e.audit("retry"); n != 1 {
		t.Errorf("a failed resend attempt wrote %d audit entries, want 1", n)
	}
}
