package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/jobs"
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
		follow     = fs.Bool("follow-chains", true, "let the job follow the ordering chains of the failures it resends (jobs.ChainFollower), as in production; false measures the job without that look-up")
		traceSQL   = fs.Bool("trace-sql", false, "print, per statement, the calls and their time while each job ran")
		cpuProfile = fs.String("cpuprofile", "", "write a CPU profile of this process over the jobs' runs to this file")
		dbURL      = scratchServerFlag(fs)
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 || *runs <= 0 || *valueSize < 0 || *partitions <= 0 || *batch <= 0 {
		return errors.New("-n, -runs, -batch and -partitions must be positive, -value-size not negative")
	}
	var trace *sqlTrace
	var tracer pgx.QueryTracer
	if *traceSQL {
		trace = newSQLTrace()
		tracer = trace
	}
	pool, drop, err := scratchDatabaseTraced(ctx, *dbURL, 0, tracer)
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
	var pub jobs.Publisher = sched.Resender()
	if !*follow {
		pub = struct{ jobs.Publisher }{pub} // hides the ChainFollower
	}
	runner, err := jobs.New(jobs.Config{Store: st, Publisher: pub, Owner: "bench", PollInterval: 20 * time.Millisecond,
		BatchSize: *batch, Logger: discard})
	if err != nil {
		return err
	}
	rctx, stopRunner := context.WithCancel(ctx)
	runnerDone := make(chan error, 1)
	go func() { runnerDone <- runner.Run(rctx) }()
	defer func() { stopRunner(); <-runnerDone }()

	fmt.Printf("jobs benchmark: a retry job over %d stored failures of %d bytes, 3 stored headers, %d partitions, batch %d, following chains: %t\n",
		*n, *valueSize, *partitions, *batch, *follow)
	fmt.Println("job: records/s from the start until the job is DONE (every record acknowledged, every outcome recorded)")
	fmt.Println("cpu: CPU time per record of this process (producer, in-process broker) while the plain producer ran,")
	fmt.Println("     and per item of the database's backends and of this process while the job ran")
	fmt.Printf("%-5s %12s %12s %7s %14s %10s %10s %10s\n", "run", "plain rec/s", "job rec/s", "ratio", "max gap (ms)",
		"plain cpu", "job db cpu", "job cpu")
	var plains, jobs, ratios []float64
	for r := 1; r <= *runs; r++ {
		plainCPU := resendCPU(ctx, pool).self
		plain, err := resendPlainProducer(bootstrap, "bench-plain", *n, *valueSize, r)
		if err != nil {
			return err
		}
		plainCPU = resendCPU(ctx, pool).self - plainCPU
		// The first run's job is traced and profiled, from its start until it is DONE.
		var profiled *os.File
		onStart := func() error {
			if r != 1 {
				return nil
			}
			if trace != nil {
				trace.start()
			}
			if *cpuProfile != "" {
				f, err := os.Create(*cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					_ = f.Close()
					return err
				}
				profiled = f
			}
			return nil
		}
		res, err := benchJobRun(ctx, pool, st, core, *n, *valueSize, r, onStart)
		if profiled != nil {
			pprof.StopCPUProfile()
			_ = profiled.Close()
		}
		if err != nil {
			return err
		}
		if trace != nil && r == 1 {
			defer trace.report(*n)
			trace.stop()
		}
		pr, jr := float64(*n)/plain.Seconds(), float64(*n)/res.took.Seconds()
		plains, jobs, ratios = append(plains, pr), append(jobs, jr), append(ratios, jr/pr)
		perItem := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(*n) }
		fmt.Printf("%-5d %12.0f %12.0f %7.2f %14d %7.0f µs %7.0f µs %7.0f µs\n", r, pr, jr, jr/pr, res.gap.Milliseconds(),
			perItem(plainCPU), perItem(res.cpu.backends), perItem(res.cpu.self))
	}
	fmt.Printf("%-5s %12.0f %12.0f %7.2f\n", "med", resendMedian(plains), resendMedian(jobs), resendMedian(ratios))
	fmt.Printf("ratio of the medians: %.2f\n", resendMedian(jobs)/resendMedian(plains))
	return nil
}

// jobRun is the measure of one job.
type jobRun struct {
	took time.Duration  // from the start until the job is DONE
	gap  time.Duration  // the longest time its progress did not change while it ran
	cpu  resendCPUTimes // consumed while it ran
}

// benchJobRun stores n open failures, previews and starts a retry job over them, and returns
// the time from the start until the job is DONE, the longest time its progress (the count of
// items acted on, polled every 50 ms) did not change while it ran, and the CPU time consumed
// meanwhile by the database's backends and by this process.
func benchJobRun(ctx context.Context, pool *pgxpool.Pool, st *store.Store, core *operator.Core, n, valueSize, run int, onStart func() error) (jobRun, error) {
	label := fmt.Sprintf("j%d", run)
	if err := resendInsertDue(ctx, pool, "bench-job", label, n, valueSize, 24*time.Hour); err != nil {
		return jobRun{}, err
	}
	if err := resendQuiesce(ctx, pool); err != nil {
		return jobRun{}, err
	}
	f := redrive.Filter{Topic: "bench-job", States: []redrive.State{redrive.StateRetryPending}}
	p, err := core.PreviewJob(ctx, operator.JobRequest{Action: operator.Retry, Selection: operator.Selection{Filter: &f},
		Principal: "bench", RateLimit: operator.MaxJobRate})
	if err != nil {
		return jobRun{}, err
	}
	if p.Job.Total != int64(n) {
		return jobRun{}, fmt.Errorf("the preview pinned %d failures, want %d", p.Job.Total, n)
	}
	if err := onStart(); err != nil {
		return jobRun{}, err
	}
	start := time.Now()
	cpu0 := resendCPU(ctx, pool)
	if _, err := core.StartJob(ctx, p.Job.ID, p.Token, operator.Reader{Principal: "bench"}); err != nil {
		return jobRun{}, err
	}
	var (
		last     int64 = -1
		lastSeen       = start
		gap      time.Duration
	)
	for {
		j, err := core.Job(ctx, p.Job.ID, operator.Reader{Principal: "bench"})
		if err != nil {
			return jobRun{}, err
		}
		now := time.Now()
		if acted := j.Done + j.Skipped + j.Failed; acted != last {
			gap = max(gap, now.Sub(lastSeen))
			last, lastSeen = acted, now
		}
		if j.State == redrive.JobDone {
			if j.Done != int64(n) {
				return jobRun{}, fmt.Errorf("job done with %d done, %d skipped, %d failed", j.Done, j.Skipped, j.Failed)
			}
			cpu := resendCPU(ctx, pool)
			return jobRun{took: now.Sub(start), gap: gap, cpu: resendCPUTimes{self: cpu.self - cpu0.self, backends: cpu.backends - cpu0.backends}}, nil
		}
		if now.Sub(start) > 30*time.Minute {
			return jobRun{}, fmt.Errorf("job not done after 30 minutes: %+v", j.Job)
		}
		select {
		case <-ctx.Done():
			return jobRun{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
