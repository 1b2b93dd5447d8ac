package resend

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type auditRow struct {
	Principal string
	Reason    *string
	Action    string
	Details   map[string]any
}

func (e *env) audit(t *testing.T, id uuid.UUID) []auditRow {
	t.Helper()
	rows, err := e.pool.Query(context.Background(),
		`SELECT principal, reason, action, details FROM audit_log WHERE failure_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var (
			a   auditRow
			raw []byte
		)
		if err := rows.Scan(&a.Principal, &a.Reason, &a.Action, &raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &a.Details); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func TestResendIDsOutcomes(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 2})
	s := e.scheduler(t, nil)
	r := s.Resender()
	now := e.clock.Now()
	future := now.Add(time.Hour)
	until := now.Add(time.Minute)
	other := "other-instance"
	resentAt := now.Add(-time.Hour)

	permanent := e.insertFailure(t, row{Topic: topic, State: redrive.StatePermanent, Temporality: "PERMANENT"})
	pending := e.insertFailure(t, row{Topic: topic, NextAttemptAt: &future})
	resent := e.insertFailure(t, row{Topic: topic, State: redrive.StateResent, ResentAt: &resentAt})
	closed := e.insertFailure(t, row{Topic: topic, State: redrive.StateClosed})
	inFlight := e.insertFailure(t, row{Topic: topic, LeaseOwner: &other, LeaseUntil: &until})
	missing := uuid.New()

	ids := []uuid.UUID{permanent, pending, resent, closed, inFlight, missing, permanent}
	res, err := r.ResendIDs(context.Background(), ids, ManualRequest{Principal: "alice", Reason: "db fixed"})
	if err != nil {
		t.Fatalf("ResendIDs: %v", err)
	}
	want := []struct {
		id      uuid.UUID
		outcome Outcome
		state   redrive.State
	}{
		{permanent, redrive.OutcomeResent, redrive.StatePermanent},
		{pending, redrive.OutcomeResent, redrive.StateRetryPending},
		{resent, redrive.OutcomeConflict, redrive.StateResent},
		{closed, redrive.OutcomeConflict, redrive.StateClosed},
		{inFlight, redrive.OutcomeConflict, redrive.StateRetryPending},
		{missing, redrive.OutcomeNotFound, ""},
	}
	if len(res.Items) != len(want) {
		t.Fatalf("%d items, want %d (one per distinct id): %+v", len(res.Items), len(want), res.Items)
	}
	for i, w := range want {
		got := res.Items[i]
		if got.ID != w.id || got.Outcome != w.outcome || got.State != w.state {
			t.Errorf("item %d: %+v, want %s %s from %s", i, got, w.id, w.outcome, w.state)
		}
		if (got.Outcome == redrive.OutcomeResent) != (got.Error == "") {
			t.Errorf("item %d: outcome %s with error %q", i, got.Outcome, got.Error)
		}
	}
	if res.Resent != 2 || res.Conflict != 3 || res.NotFound != 1 || res.Failed != 0 {
		t.Errorf("counts %+v", res)
	}
	if !strings.Contains(res.Items[4].Error, "in progress") || !strings.Contains(res.Items[2].Error, "RESENT") {
		t.Errorf("conflict errors: %q, %q", res.Items[2].Error, res.Items[4].Error)
	}
	for _, id := range []uuid.UUID{permanent, pending} {
		if f := e.failure(t, id); f.State != redrive.StateResent || f.ResentAt == nil || f.LeaseOwner != nil {
			t.Errorf("%s after manual resend: %+v", id, f)
		}
	}
	if f := e.failure(t, inFlight); f.LeaseOwner == nil || *f.LeaseOwner != other {
		t.Errorf("the in-flight failure's lease changed: %+v", f)
	}
	if got := e.records(topic); got != 2 {
		t.Errorf("topic holds %d records, want 2", got)
	}
	for _, w := range want {
		entries := e.audit(t, w.id)
		if w.outcome == redrive.OutcomeConflict || w.outcome == redrive.OutcomeNotFound {
			// Refused: nothing happened to the failure, so nothing is audited.
			if len(entries) != 0 {
				t.Errorf("%s: %d audit entries, want none", w.outcome, len(entries))
			}
			continue
		}
		if len(entries) != 1 {
			t.Errorf("%s: %d audit entries, want 1", w.outcome, len(entries))
			continue
		}
		a := entries[0]
		if a.Action != "retry" || a.Principal != "alice" || a.Reason == nil || *a.Reason != "db fixed" ||
			a.Details["outcome"] != string(w.outcome) || a.Details["trigger"] != "manual" {
			t.Errorf("%s: audit entry %+v", w.outcome, a)
		}
	}
	if got := testutil.ToFloat64(s.metrics.resends.WithLabelValues(TriggerManual, string(redrive.OutcomeConflict))); got != 3 {
		t.Errorf("manual conflict metric %v, want 3", got)
	}
}

func TestResendIDsInvalidRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]int{"orders": 1})
	r := e.scheduler(t, func(c *Config) { c.MaxManualIDs = 2 }).Resender()
	ctx := context.Background()
	if _, err := r.ResendIDs(ctx, []uuid.UUID{uuid.New()}, ManualRequest{}); !errors.Is(err, redrive.ErrInvalidRequest) {
		t.Errorf("no principal: %v", err)
	}
	if _, err := r.ResendIDs(ctx, []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}, ManualRequest{Principal: "a"}); !errors.Is(err, redrive.ErrInvalidRequest) {
		t.Errorf("too many ids: %v", err)
	}
	if r.MaxIDs() != 2 || r.ServiceName() != "redrive-test" {
		t.Errorf("MaxIDs %d, ServiceName %q", r.MaxIDs(), r.ServiceName())
	}
}

// The rate limit holds back what exceeds it; ids not attempted before the context ends are
// reported failed and audited, never dropped silently.
func TestResendIDsRateLimit(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	r := e.scheduler(t, func(c *Config) { c.ManualRate = 0.1; c.ManualBurst = 1 }).Resender()
	var ids []uuid.UUID
	for range 3 {
		ids = append(ids, e.insertFailure(t, row{Topic: topic, State: redrive.StatePermanent}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res, err := r.ResendIDs(ctx, ids, ManualRequest{Principal: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resent != 1 || res.Failed != 2 || res.Items[0].Outcome != redrive.OutcomeResent {
		t.Fatalf("result %+v", res)
	}
	for _, it := range res.Items[1:] {
		if !strings.Contains(it.Error, "not attempted") {
			t.Errorf("item %s: error %q", it.ID, it.Error)
		}
		if f := e.failure(t, it.ID); f.State != redrive.StatePermanent {
			t.Errorf("item %s: state %s", it.ID, f.State)
		}
		if a := e.audit(t, it.ID); len(a) != 1 || a[0].Details["outcome"] != "failed" {
			t.Errorf("item %s: audit %+v", it.ID, a)
		}
	}
	if got := e.records(topic); got != 1 {
		t.Errorf("topic holds %d records, want 1", got)
	}
}

// A manual resend that the broker refuses is a failed outcome with the error; the failure keeps
// its state.
func TestResendIDsBrokerFailure(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	r := e.scheduler(t, func(c *Config) { c.SendTimeout = time.Second }).Resender()
	id := e.insertFailure(t, row{Topic: topic, State: redrive.StatePermanent})
	fault := e.cluster.FailProduce(topic, 0)
	defer fault.Remove()
	res, err := r.ResendIDs(context.Background(), []uuid.UUID{id}, ManualRequest{Principal: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 1 || res.Items[0].Outcome != redrive.OutcomeFailed || res.Items[0].Error == "" {
		t.Fatalf("result %+v", res)
	}
	f := e.failure(t, id)
	if f.State != redrive.StatePermanent || f.ResendFailures != 1 || f.LastResendError == nil || f.NextAttemptAt != nil || f.LeaseOwner != nil {
		t.Fatalf("failure after the refused resend: %+v", f)
	}
	if a := e.audit(t, id); len(a) != 1 || a[0].Details["outcome"] != "failed" || a[0].Details["error"] == nil {
		t.Fatalf("audit %+v", a)
	}
}
