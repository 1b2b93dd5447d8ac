package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// Publisher sends a job's records. *resend.Resender implements it.
type Publisher interface {
	// Publish produces one record per item and waits for the acknowledgements. It returns one
	// error per item: nil when acknowledged, one wrapping redrive.ErrClosed when the record
	// was not sent (shutting down). The records' spans are children of ctx's span.
	Publish(ctx context.Context, items []store.ResendItem) []error
	// RetryAt is when a RETRY_PENDING failure whose resend was not acknowledged for the
	// failures-th time is due again.
	RetryAt(failures int, now time.Time) time.Time
	// Delivered reports which of records (by tag) reached the broker at or after since.
	Delivered(ctx context.Context, since time.Time, records []resendtype.Tagged) (map[string]bool, error)
	// ServiceName is this service's name, for the audit entries.
	ServiceName() string
}

// Hooks are called between the steps of a retry job's batch, for fault injection in tests. A
// hook that returns an error makes the runner stop as a crashed instance would: it writes
// nothing more (no settle, no release of the job) and its Run returns once ctx ends.
type Hooks struct {
	// AfterClaim is called when a batch is claimed, before its records are loaded and sent.
	AfterClaim func(ctx context.Context, b *store.JobBatch) error
	// AfterSend is called when the batch's acknowledgements are in, before it is settled.
	AfterSend func(ctx context.Context, b *store.JobBatch) error
	// AfterSettle is called when the batch's outcome is recorded.
	AfterSettle func(ctx context.Context, b *store.JobBatch) error
}

// Defaults of Config.
const (
	DefaultPollInterval = time.Second
	DefaultLease        = 60 * time.Second
	DefaultHeartbeat    = 250 * time.Millisecond
	DefaultBatchSize    = 500
	DefaultConcurrency  = 4
	DefaultMaxJobs      = 16
	DefaultMaxBatches   = 8
	// DefaultBatchTimeout bounds the send and settle of one batch.
	DefaultBatchTimeout = 2 * time.Minute
)

// Config configures a Runner. A zero field means the documented default.
type Config struct {
	// Store is the failure store. Required.
	Store *store.Store
	// Publisher sends the records of retry and resend_to jobs. When nil, the runner runs close
	// jobs only: it releases any other job it claims, for an instance that can send.
	Publisher Publisher
	// Owner names this instance in the jobs and claims it holds; it must differ between
	// instances. Required.
	Owner string
	// PollInterval is the time between two looks for a job to run. Defaults to 1s.
	PollInterval time.Duration
	// Lease is how long a job stays with this instance without a heartbeat; another instance
	// resumes it after that. Defaults to 60s.
	Lease time.Duration
	// Heartbeat is how often a running job's lease is renewed and its state read: a pause or
	// cancel takes effect within it. Defaults to 250ms; at most Lease/3.
	Heartbeat time.Duration
	// ClaimGrace is how old a claim of a job must be before an instance other than its owner
	// settles it: longer than a batch can take (BatchTimeout). Defaults to Lease + BatchTimeout.
	ClaimGrace time.Duration
	// BatchSize bounds the items of one batch; a job's batch is also at most its rate (items
	// per second), so that a batch is at most one second of the job. Defaults to 500.
	BatchSize int
	// Concurrency is the number of batches of one job in flight at once. Defaults to 4.
	Concurrency int
	// MaxJobs is the number of jobs this instance holds at once; each runs on its own, so a
	// job waiting on a low rate limit never delays another. Defaults to 16.
	MaxJobs int
	// MaxBatches is the number of batches, of all its jobs, this instance has in flight at
	// once; jobs waiting on their rate limits hold none. Defaults to 8.
	MaxBatches int
	// BatchTimeout bounds the send and settle of one batch, which run to their end when ctx
	// ends. Defaults to 2m.
	BatchTimeout time.Duration
	// Hooks inject faults in tests. Defaults to none.
	Hooks Hooks
	// TracerProvider, when set, traces every batch of a job with a span (docs/operations.md,
	// Tracing). Defaults to none: no spans.
	TracerProvider trace.TracerProvider
	// Logger receives errors and events. Defaults to a logger that discards.
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Runner runs jobs; see the package documentation.
type Runner struct {
	cfg   Config
	store *store.Store
	log   *slog.Logger
	// dead is set when a hook returned an error: the runner behaves as a crashed instance.
	dead    atomic.Bool
	running atomic.Bool
	// batches holds a token per batch in flight (MaxBatches).
	batches chan struct{}
	tracer  *jobTracer // nil: tracing off
}

// New returns a Runner for cfg, or an error starting with "invalid config".
func New(cfg Config) (*Runner, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("invalid config: "+format, args...)) }
	if cfg.Store == nil {
		bad("Store is required")
	}
	if cfg.Owner == "" {
		bad("Owner is required")
	}
	if cfg.PollInterval < 0 || cfg.Lease < 0 || cfg.Heartbeat < 0 || cfg.ClaimGrace < 0 || cfg.BatchTimeout < 0 {
		bad("PollInterval, Lease, Heartbeat, ClaimGrace and BatchTimeout must not be negative")
	}
	if cfg.BatchSize < 0 || cfg.Concurrency < 0 || cfg.MaxJobs < 0 || cfg.MaxBatches < 0 {
		bad("BatchSize, Concurrency, MaxJobs and MaxBatches must not be negative")
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = min(DefaultHeartbeat, cfg.Lease/3)
	}
	if cfg.Heartbeat > cfg.Lease/3 {
		bad("Heartbeat %s must be at most a third of Lease %s", cfg.Heartbeat, cfg.Lease)
	}
	if cfg.BatchTimeout == 0 {
		cfg.BatchTimeout = DefaultBatchTimeout
	}
	if cfg.ClaimGrace == 0 {
		cfg.ClaimGrace = cfg.Lease + cfg.BatchTimeout
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.MaxJobs == 0 {
		cfg.MaxJobs = DefaultMaxJobs
	}
	if cfg.MaxBatches == 0 {
		cfg.MaxBatches = DefaultMaxBatches
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runner{cfg: cfg, store: cfg.Store, log: cfg.Logger, batches: make(chan struct{}, cfg.MaxBatches),
		tracer: newJobTracer(cfg.TracerProvider)}, nil
}

// Previews whose token expired more than previewKeep ago are deleted, with their pinned items,
// by a sweep every previewSweepEvery.
const (
	previewKeep       = 24 * time.Hour
	previewSweepEvery = 10 * time.Minute
)

// Run runs jobs until ctx ends: every PollInterval it settles the claims that jobs paused or
// canceled left behind (a batch in flight on an instance that died) and claims running jobs
// until MaxJobs run here. When ctx ends, each job stops where it is (its batches in flight
// are sent and settled; items not attempted stay pending) and is released for another
// instance; Run returns when they are. It also deletes previews that expired a day ago.
func (r *Runner) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("jobs runner: Run called twice")
	}
	r.log.Info("jobs runner started", "owner", r.cfg.Owner, "max_jobs", r.cfg.MaxJobs)
	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, r.cfg.MaxJobs)
		swept time.Time
	)
	defer wg.Wait()
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		if r.dead.Load() {
			<-ctx.Done()
			return nil
		}
		if now := r.cfg.Now(); now.Sub(swept) >= previewSweepEvery {
			swept = now
			if n, err := r.store.DeleteExpiredPreviews(ctx, now.Add(-previewKeep)); err != nil && ctx.Err() == nil {
				r.log.Error("jobs: deleting expired previews failed", "error", err)
			} else if n > 0 {
				r.log.Info("jobs: deleted expired previews", "count", n)
			}
		}
		r.settleStranded(ctx)
	claim:
		for ctx.Err() == nil && !r.dead.Load() {
			select {
			case slots <- struct{}{}:
			default:
				break claim // MaxJobs run here
			}
			now := r.cfg.Now()
			job, err := r.store.ClaimJob(ctx, r.cfg.Owner, now, now.Add(r.cfg.Lease))
			if err != nil || job == nil {
				<-slots
				if err != nil && ctx.Err() == nil {
					r.log.Error("jobs: claim failed", "error", err)
				}
				break
			}
			wg.Go(func() {
				defer func() { <-slots }()
				r.runJob(ctx, job)
			})
		}
		select {
		case <-ctx.Done():
			r.log.Info("jobs runner stopping", "owner", r.cfg.Owner)
			return nil
		case <-t.C:
		}
	}
}

// abandon reports whether a hook's err makes the runner die here, and logs it.
func (r *Runner) abandon(step string, err error) bool {
	if err == nil {
		return r.dead.Load()
	}
	if !r.dead.Swap(true) {
		r.log.Warn("jobs: a hook stopped the runner as a crash would", "step", step, "error", err)
	}
	return true
}

// settleStranded settles the claims that paused or canceled jobs left behind: the records that
// reached the broker count done, the others stay pending.
func (r *Runner) settleStranded(ctx context.Context) {
	if r.cfg.Publisher == nil {
		return // only retry jobs claim; an instance that sends settles them
	}
	claims, err := r.store.StrandedJobClaims(ctx, r.cfg.Now().Add(-r.cfg.ClaimGrace), 100)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("jobs: reading stranded claims failed", "error", err)
		}
		return
	}
	for _, c := range claims {
		if ctx.Err() != nil || r.dead.Load() {
			return
		}
		job, err := r.store.JobByID(ctx, c.JobID)
		if err != nil {
			r.log.Error("jobs: reading a stranded claim's job failed", "job", c.JobID, "error", err)
			continue
		}
		newJobRun(r, ctx, job).recoverClaim(ctx, c, false)
	}
}
