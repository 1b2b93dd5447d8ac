package franz

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/internal/engine"
)

// Tuning of the poll loop.
const (
	// pollTimeout bounds how long the loop waits for records, and so how fast it reacts to a
	// halt, a release or a dead-letter outcome.
	pollTimeout = 100 * time.Millisecond
	// burstSize is the most records one poll returns.
	burstSize = 4096
	// commitTimeout bounds one synchronous commit.
	commitTimeout = 10 * time.Second
	// fetchMaxWait is the consumer's default kgo.FetchMaxWait (ConsumerOpts may override it).
	fetchMaxWait = 200 * time.Millisecond
)

// Runner is a complete consumer on franz-go: it owns the poll loop, rebalances, pausing and
// commits, hands each partition's records in order to the Handler, and applies the policies
// to failures. A halted or waiting partition is paused with PauseFetchPartitions; only final
// offsets are committed (autocommit is off), and rebalances are blocked while a poll's records
// are dispatched (BlockRebalanceOnPoll), so a revoke or a loss (OnPartitionsRevoked,
// OnPartitionsLost) always sees a consistent state.
type Runner[K, V any] struct {
	e *engine.Engine[K, V]
	s Settings

	// mu serializes the poll loop's work with the partition callbacks, which kgo runs on its
	// own goroutine.
	mu   sync.Mutex
	cons *consumer
	// closing is set when the shutdown starts: from then on the callbacks leave the engine
	// alone (the shutdown lets go of every partition itself), so that a rebalance during the
	// shutdown's synchronous commit does not wait for mu.
	closing atomic.Bool
}

// New validates cfg and s and returns a Runner. Nothing connects before Run.
func New[K, V any](cfg errorhandler.Config[K, V], s Settings) (*Runner[K, V], error) {
	if err := s.validate(true); err != nil {
		return nil, err
	}
	e, err := engine.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Runner[K, V]{e: e, s: s}, nil
}

// Run consumes until ctx ends, then shuts down cleanly: it stops taking records, waits (at
// most ShutdownTimeout) for running handlers and in-flight MPFEs, commits every final offset and
// leaves the group. It returns nil after a clean shutdown, or an error when records were let go
// uncommitted. Run may be called once.
func (r *Runner[K, V]) Run(ctx context.Context) error {
	cfg := r.e.Config()
	log := r.e.Logger()
	if _, err := r.e.Open(newProducer(&r.s, cfg.DeadLetter.ErrorTopic, log)); err != nil {
		return err
	}
	defer r.e.Stopped()
	// A resumed partition is fetched again only after the broker's fetch in flight returns,
	// which waits up to FetchMaxWait when the other partitions have no new data: the default
	// of 5s would stall a partition resumed after a flow-control pause or a release.
	opts := append([]kgo.Opt{kgo.ClientID("redrive-errorhandler"), kgo.WithLogger(newLogger(log)), kgo.FetchMaxWait(fetchMaxWait)}, r.s.ConsumerOpts...)
	if r.s.GroupInstanceID != "" {
		opts = append(opts, kgo.InstanceID(r.s.GroupInstanceID))
	}
	opts = append(opts,
		kgo.SeedBrokers(r.s.Brokers...),
		kgo.ConsumerGroup(cfg.GroupID),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onLost),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		_ = r.e.CloseDeadLetterer()
		return fmt.Errorf("run: new consumer client: %w", err)
	}
	r.mu.Lock()
	r.cons = &consumer{cl: cl}
	r.e.Start()
	r.mu.Unlock()
	log.Info("consumer started", "client", "franz-go", "topics", cfg.Topics, "group_instance_id", r.s.GroupInstanceID)

	wake := r.e.Wake()
	for ctx.Err() == nil {
		// The poll ends early when the engine must pause or may resume a partition.
		pollCtx, cancel := context.WithTimeout(ctx, pollTimeout)
		polled := make(chan struct{})
		go func() {
			select {
			case <-wake:
				cancel()
			case <-polled:
			case <-pollCtx.Done():
			}
		}()
		fetches := cl.PollRecords(pollCtx, burstSize)
		close(polled)
		cancel()
		r.mu.Lock()
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			if ok, n := r.e.Throttle("consumer-error"); ok {
				log.Warn("consumer error", "topic", topic, "partition", partition, "error", err, "suppressed", n)
			}
		})
		fetches.EachRecord(func(rec *kgo.Record) {
			m := Message(rec)
			r.e.Dispatch(&m)
		})
		r.e.Flush()
		r.e.Reconcile(r.cons)
		r.mu.Unlock()
		// Outside mu: CommitOffsetsSync waits for a join in progress, whose revoke callback
		// waits for mu. A partition revoked meanwhile is committed by its revoke too.
		r.e.CommitDue(r.cons)
		cl.AllowRebalance()
	}
	r.closing.Store(true)
	r.mu.Lock()
	err = r.e.Shutdown(r.cons)
	r.mu.Unlock()
	cl.AllowRebalance()
	cl.Close() // leaves the group (unless static membership); its revoke finds nothing left
	log.Info("consumer stopped")
	return err
}

func (r *Runner[K, V]) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	if r.closing.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.e.Assign(toTPs(assigned))
	r.e.Logger().Info("partitions assigned", "partitions", assigned)
}

func (r *Runner[K, V]) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if r.closing.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	held := map[engine.TP]bool{}
	for _, tp := range r.e.Assigned() {
		held[tp] = true
	}
	var mine []engine.TP
	for _, tp := range toTPs(revoked) {
		if held[tp] {
			mine = append(mine, tp)
		}
	}
	if len(mine) == 0 {
		return // e.g. when the client closes after the shutdown let go of everything
	}
	r.e.Revoke(r.cons, mine, true)
	r.e.Logger().Info("partitions revoked", "partitions", revoked)
}

func (r *Runner[K, V]) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if r.closing.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.e.Revoke(r.cons, toTPs(lost), false)
	r.e.Logger().Warn("partitions lost; their uncommitted records go to the next owner", "partitions", lost)
}

// Health returns a snapshot of the runner's state.
func (r *Runner[K, V]) Health() errorhandler.Health { return r.e.Health() }

// Release releases the halted partition topic/partition: its halted record is skipped or
// dead-lettered (action), and the partition resumes after it. When offset is not negative it
// must be the halted record's offset (ErrWrongOffset otherwise), so that an operator releases
// the record they looked at.
func (r *Runner[K, V]) Release(ctx context.Context, topic string, partition int32, offset int64, action errorhandler.Action) error {
	return r.e.Release(ctx, topic, partition, offset, action)
}

// HealthHandler returns an http.Handler that serves the health snapshot as JSON on GET (status
// 200 whether ok or degraded: a halted partition is not a reason to restart the process) and
// releases a halted partition on POST with a JSON body
// {"topic": "...", "partition": 3, "offset": 42, "action": "skip" | "dead-letter"}
// (offset optional). Errors are application/problem+json.
func (r *Runner[K, V]) HealthHandler() http.Handler { return r.e.HealthHandler() }

// consumer carries out the engine's requests on a kgo client.
type consumer struct{ cl *kgo.Client }

func (c *consumer) Pause(tp engine.TP) error {
	c.cl.PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
	return nil
}

// Resume seeks only when records were dropped: kgo does not move a paused partition's cursor
// past records it held back (they are stripped from polls and fetched again), and a seek
// restarts the partition's fetch session.
func (c *consumer) Resume(tp engine.TP, offset int64, dropped bool) error {
	if dropped && offset >= 0 {
		// SetOffsets drops what was buffered for the partition: fetching continues at offset.
		c.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{tp.Topic: {tp.Partition: {Epoch: -1, Offset: offset}}})
	}
	c.cl.ResumeFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
	return nil
}

func (c *consumer) Commit(offs []engine.CommitOffset) error {
	m := make(map[string]map[int32]kgo.EpochOffset)
	for _, o := range offs {
		if m[o.Topic] == nil {
			m[o.Topic] = map[int32]kgo.EpochOffset{}
		}
		m[o.Topic][o.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o.Offset}
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	var commitErr error
	var resp *kmsg.OffsetCommitResponse
	c.cl.CommitOffsetsSync(ctx, m, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, r *kmsg.OffsetCommitResponse, err error) {
		resp, commitErr = r, err
	})
	if commitErr != nil {
		return commitErr
	}
	if resp == nil {
		return errors.New("commit: no response")
	}
	for i := range offs {
		offs[i].Err = errors.New("not in the commit response")
		for _, t := range resp.Topics {
			if t.Topic != offs[i].Topic {
				continue
			}
			for _, p := range t.Partitions {
				if p.Partition == offs[i].Partition {
					offs[i].Err = kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
	}
	return nil
}

func toTPs(m map[string][]int32) []engine.TP {
	var out []engine.TP
	for topic, parts := range m {
		for _, p := range parts {
			out = append(out, engine.TP{Topic: topic, Partition: p})
		}
	}
	return out
}
