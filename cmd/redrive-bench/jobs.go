package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

func init() { commands["jobs"] = benchJobs }

// benchJobs measures a retry job over stored failures (records/s from the start until the job
// is DONE: every record acknowledged and every outcome recorded) against a plain
// confluent-kafka-go producer sending the same records, in the same run, to the same cluster,
// and the longest time the job's progress went without a visible change.
func benchJobs(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("jobs", flag.ContinueOnError)
	var (
		n          = fs.Int("n", 100000, "stored failures the job retries per run")
		valueSize  = fs.Int("value-size", 1024, "bytes per record value")
		partitions = fs.Int("partitions", 6, "partitions of the benchmark topics")
		runs       = fs.Int("runs", 3, "runs; each retries -n fresh failures and sends -n plain records")
		batch      = fs.Int("batch", 1000, "items a job acts on and records at once")
		dbURL      = scratchServerFlag(fs)
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 || *runs <= 0 || *valueSize < 0 || *partitions <= 0 || *batch <= 0 {
		return errors.New("-n, -runs, -batch and -partitions must be positive, -value-size not negative")
	}
	pool, drop, err := scratchDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer drop()
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		return err
	}
	cluster, bootstrap, err := startCluster(map[string]int{"bench-plain": *partitions, "bench-job": *partitions})
	if err != nil {
		return err
	}
	defer cluster.Close()

	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	sched, err := resend.New(resend.Config{
		Store: st, Brokers: bootstrap, Producer: kafka.ConfigMap{"log_level": 3}, DisableAutomatic: true,
		Housekeeping: resend.HousekeepingConfig{Disable: true}, ManualRate: 1e7, MaxManualIDs: *batch,
		Logger: discard, Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		return err
	}
	sctx, stopSched := context.WithCancel(ctx)
	schedDone := make(chan error, 1)
	go func() { schedDone <- sched.Run(sctx) }()
	defer func() { stopSched(); <-schedDone }()
	core, err := operator.New(operator.Config{Store: st, Resender: sched.Resender(), Logger: discard})
	if err != nil {
		return err
	}
	rctx, stopRunner := context.WithCancel(ctx)
	runnerDone := make(chan error, 1)
	go func() {
		runnerDone <- core.RunJobs(rctx, operator.JobRunnerConfig{Owner: "bench", PollInterval: 20 * time.Millisecond, BatchSize: *batch})
	}()
	defer func() { stopRunner(); <-runnerDone }()

	fmt.Printf("jobs benchmark: a retry job over %d stored failures of %d bytes, 3 stored headers, %d partitions, batch %d\n",
		*n, *valueSize, *partitions, *batch)
	fmt.Println("job: records/s from the start until the job is DONE (every record acknowledged, every outcome recorded)")
	fmt.Printf("%-5s %12s %12s %7s %14s\n", "run", "plain rec/s", "job rec/s", "ratio", "max gap (ms)")
	var plains, jobs, ratios []float64
	for r := 1; r <= *runs; r++ {
		plain, err := resendPlainProducer(bootstrap, "bench-plain", *n, *valueSize, r)
		if err != nil {
			return err
		}
		took, gap, err := benchJobRun(ctx, pool, st, core, *n, *valueSize, r)
		if err != nil {
			return err
		}
		pr, jr := float64(*n)/plain.Seconds(), float64(*n)/took.Seconds()
		plains, jobs, ratios = append(plains, pr), append(jobs, jr), append(ratios, jr/pr)
		fmt.Printf("%-5d %12.0f %12.0f %7.2f %14d\n", r, pr, jr, jr/pr, gap.Milliseconds())
	}
	fmt.Printf("%-5s %12.0f %12.0f %7.2f\n", "med", resendMedian(plains), resendMedian(jobs), resendMedian(ratios))
	fmt.Printf("ratio of the medians: %.2f\n", resendMedian(jobs)/resendMedian(plains))
	return nil
}

// benchJobRun stores n open failures, previews and starts a retry job over them, and returns
// the time from the start until the job is DONE and the longest time its progress (the count
// of items acted on, polled every 50 ms) did not change while it ran.
func benchJobRun(ctx context.Context, pool *pgxpool.Pool, st *store.Store, core *operator.Core, n, valueSize, run int) (time.Duration, time.Duration, error) {
	label := fmt.Sprintf("j%d", run)
	if err := resendInsertDue(ctx, pool, "bench-job", label, n, valueSize, 24*time.Hour); err != nil {
		return 0, 0, err
	}
	if err := resendQuiesce(ctx, pool); err != nil {
		return 0, 0, err
	}
	f := store.Filter{Topic: "bench-job", States: []store.State{store.StateRetryPending}}
	p, err := core.PreviewJob(ctx, operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{Filter: &f},
		Principal: "bench", RateLimit: operator.MaxJobRate})
	if err != nil {
		return 0, 0, err
	}
	if p.Job.Total != int64(n) {
		return 0, 0, fmt.Errorf("the preview pinned %d failures, want %d", p.Job.Total, n)
	}
	start := time.Now()
	if _, err := core.StartJob(ctx, p.Job.ID, p.Token, "bench"); err != nil {
		return 0, 0, err
	}
	var (
		last     int64 = -1
		lastSeen       = start
		gap      time.Duration
	)
	for {
		j, err := core.Job(ctx, p.Job.ID)
		if err != nil {
			return 0, 0, err
		}
		now := time.Now()
		if acted := j.Done + j.Skipped + j.Failed; acted != last {
			gap = max(gap, now.Sub(lastSeen))
			last, lastSeen = acted, now
		}
		if j.State == store.JobDone {
			if j.Done != int64(n) {
				return 0, 0, fmt.Errorf("job done with %d done, %d skipped, %d failed", j.Done, j.Skipped, j.Failed)
			}
			return now.Sub(start), gap, nil
		}
		if now.Sub(start) > 30*time.Minute {
			return 0, 0, fmt.Errorf("job not done after 30 minutes: %+v", j.Job)
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
