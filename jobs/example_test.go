package jobs_test

import (
	"context"
	"log/slog"

	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

// A service instance runs one jobs runner beside its resend scheduler, sending through the
// scheduler's producer; it runs until ctx ends (SIGTERM), then releases its jobs.
func Example() {
	run := func(ctx context.Context, st *store.Store, sched *resend.Scheduler, log *slog.Logger) error {
		r, err := jobs.New(jobs.Config{
			Store:     st,
			Publisher: sched.Resender(),
			Owner:     sched.InstanceID() + "/jobs",
			Logger:    log,
		})
		if err != nil {
			return err
		}
		return r.Run(ctx)
	}
	_ = run
}
