package operator_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/operator"
)

func insertN(t *testing.T, pool *pgxpool.Pool, n int, r testkit.FailureRow) []uuid.UUID {
	t.Helper()
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = testkit.InsertFailure(t, pool, r)
	}
	return out
}

func states(t *testing.T, pool *pgxpool.Pool, ids []uuid.UUID) map[redrive.State]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT state, count(*) FROM failures WHERE id = ANY($1) GROUP BY state`, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[redrive.State]int{}
	for rows.Next() {
		var (
			s redrive.State
			n int
		)
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// A forged, altered, foreign or expired token starts nothing.
func TestJobTokens(t *testing.T) {
	t.Parallel()
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	c, s := newCore(t, func(cfg *operator.Config) {
		cfg.Now = func() time.Time { return *now.Load() }
		cfg.PreviewTTL = time.Minute
	})
	pool := s.Pool()
	ids := insertN(t, pool, 2, testkit.FailureRow{})
	ctx := context.Background()
	preview := func() *operator.JobPreview {
		p, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Selection: operator.Selection{IDs: ids}, Principal: "alice", Reason: "r"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := preview(), preview()
	altered := []byte(a.Token)
	if altered[5] == 'A' {
		altered[5] = 'B'
	} else {
		altered[5] = 'A'
	}
	for name, tok := range map[string]string{
		"forged":  strings.Repeat("A", 43),
		"altered": string(altered),
		"foreign": b.Token,
		"garbage": "not a token",
		"empty":   "",
	} {
		_, err := c.StartJob(ctx, a.Job.ID, tok, operator.Reader{Principal: "mallory"})
		var ie *operator.InputError
		if !errors.As(err, &ie) || ie.Field != "token" {
			t.Errorf("%s token: %v, want an input error on token", name, err)
		}
	}
	later := start.Add(2 * time.Minute)
	now.Store(&later)
	if _, err := c.StartJob(ctx, a.Job.ID, a.Token, operator.Reader{Principal: "alice"}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token: %v", err)
	}
	if j, _ := c.Job(ctx, a.Job.ID, operator.Reader{}); j.State != redrive.JobPreview {
		t.Errorf("after refused tokens the job is %s", j.State)
	}
	if _, err := c.StartJob(ctx, uuid.New(), a.Token, operator.Reader{Principal: "alice"}); !errors.Is(err, redrive.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if got := states(t, pool, ids); got[redrive.StatePermanent] != 2 {
		t.Errorf("refused tokens changed failures: %v", got)
	}
	// Bad requests create nothing.
	empty := redrive.Filter{}
	for name, req := range map[string]operator.JobRequest{
		"empty filter":  {Action: operator.Close, Reason: "r", Selection: operator.Selection{Filter: &empty}},
		"no reason":     {Action: operator.Close, Selection: operator.Selection{IDs: ids}},
		"no selection":  {Action: operator.Close, Reason: "r"},
		"bad action":    {Action: "delete", Selection: operator.Selection{IDs: ids}},
		"retry, no way": {Action: operator.Retry, Selection: operator.Selection{IDs: ids}},
	} {
		req.Principal = "alice"
		if _, err := c.PreviewJob(ctx, req); err == nil {
			t.Errorf("%s: preview made", name)
		}
	}
	// Absurd rates are refused, naming the field.
	for _, r := range []float64{-1, 1e-9, operator.MinJobRate / 2, operator.MaxJobRate + 1, math.NaN(), math.Inf(1)} {
		_, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Reason: "r", RateLimit: r,
			Selection: operator.Selection{IDs: ids}, Principal: "alice"})
		var ie *operator.InputError
		if !errors.As(err, &ie) || ie.Field != "rate_limit" {
			t.Errorf("rate %g: %v, want an input error on rate_limit", r, err)
		}
	}
	for _, r := range []float64{operator.MinJobRate, operator.MaxJobRate} {
		p, err := c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Reason: "r", RateLimit: r,
			Selection: operator.Selection{IDs: ids}, Principal: "alice"})
		if err != nil || p.Job.RateLimit != r {
			t.Errorf("rate %g: %+v, %v", r, p, err)
		}
	}
	page, err := c.ListJobs(ctx, 0, "", operator.Reader{})
	if err != nil || len(page.Items) != 4 {
		t.Errorf("jobs = %d (%v), want the 4 previews", len(page.Items), err)
	}
}
