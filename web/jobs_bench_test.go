package web

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/internal/testkit/storekit"
	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/operator"
)

// benchJobItems is the size of the benchmarks' job.
const benchJobItems = 5000

// benchJobHandler is the UI over a core whose one job closed benchJobItems failures, with a
// trusted proxy's viewer at httptest's address; it returns the job's id.
func benchJobHandler(b *testing.B) (http.Handler, uuid.UUID) {
	b.Helper()
	pool := testkit.Postgres(b)
	st := storekit.New(b, pool)
	base := time.Now().Add(-time.Hour)
	for i := range benchJobItems {
		testkit.InsertFailure(b, pool, testkit.FailureRow{Topic: "orders", CreatedAt: base.Add(time.Duration(i) * time.Millisecond)})
	}
	core, err := operator.New(operator.Config{Store: st, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	p, err := core.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Principal: "bench", Reason: "bench",
		RateLimit: operator.MaxJobRate, Selection: operator.Selection{Filter: &redrive.Filter{Topic: "orders"}}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := core.StartJob(ctx, p.Job.ID, p.Token, operator.Reader{Principal: "bench"}); err != nil {
		b.Fatal(err)
	}
	runner, err := jobs.New(jobs.Config{Store: st, Owner: "bench", PollInterval: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runner.Run(rctx) }()
	for deadline := time.Now().Add(5 * time.Minute); ; {
		j, err := core.Job(ctx, p.Job.ID, operator.Reader{})
		if err != nil {
			b.Fatal(err)
		}
		if j.State == redrive.JobDone {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the job is %s after 5 minutes (%d of %d)", j.State, j.Done, j.Total)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	cancel()
	<-done
	a, err := auth.NewAuthenticator(auth.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		ProxyDefaultRole: auth.RoleViewer})
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Config{Core: core, Auth: a, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	return h, p.Job.ID
}

// BenchmarkJobPage renders the page of a finished job of 5000 items: its first page of items,
// and a page deep in the list (keyset paging: the same cost).
func BenchmarkJobPage(b *testing.B) {
	h, id := benchJobHandler(b)
	b.Run("first", func(b *testing.B) { benchGet(b, h, "/jobs/"+id.String()) })
	b.Run("deep", func(b *testing.B) {
		benchGet(b, h, "/jobs/"+id.String()+"?outcome=done&after="+strconv.Itoa(benchJobItems-100))
	})
	b.Run("progress", func(b *testing.B) { benchGet(b, h, "/jobs/"+id.String()+"/progress") })
	b.Run("list", func(b *testing.B) { benchGet(b, h, "/jobs") })
}
